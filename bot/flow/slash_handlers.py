"""`/ir` subcommands answered from Redis and the hosts (the ``SlashHandlers`` protocol)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Collection
from concurrent.futures import ThreadPoolExecutor

from bot.chat.host_status import host_status
from bot.chat.slash import SlashReply
from bot.core import strings
from bot.core.errors import log_internal
from bot.domain.incident import Alert
from bot.domain.kinds import AUTO, DIAG_SUMMARY, REQUESTED_BY
from bot.domain.lifecycle import FIRST_DIAGNOSIS, StepTaken
from bot.flow.diagnose_step import Diagnoses
from bot.flow.message import Publisher
from bot.flow.progress_step import progress_text
from bot.flow.slurm_step import SlurmStep, drained_report
from bot.jobs.book import JobBook
from playbooks.glance import Glance
from storage.incidents import IncidentStore, Opens
from storage.silences import SilenceStore

STATUS_PARALLEL = 16  # hosts read at once for `/ir status`


class FlowSlashHandlers:
    """Read-only answers are ephemeral; ``diag`` opens an incident (posted in channel)."""

    def __init__(self, incidents: IncidentStore, hosts: Collection[str], diagnose: Diagnoses,
                 publisher: Publisher, jobs: JobBook, silences: SilenceStore, *,
                 opens: Opens,
                 digest_now: Callable[[], None] | None = None,
                 decide: Callable[..., str] | None = None,
                 slurm: SlurmStep | None = None,
                 stats: Callable[[int], str] | None = None,
                 glance: Callable[[str], Glance] | None = None) -> None:
        self._incidents = incidents  # read only: what `status` and `incidents` list
        self._opens = opens  # `diag`'s alert goes the alert receiver's way
        self._hosts = hosts  # the inventory's host names
        self._diagnose = diagnose
        self._publisher = publisher
        self._jobs = jobs
        self._silences = silences
        self._digest_now = digest_now
        self._decide = decide  # the approval desk's incident decisions (checks who may)
        self._stats = stats  # the response numbers over a window, as one reply
        self._glance = glance  # a host's GPUs and disks, read now (None: incidents only)
        self._drained = slurm.drained if slurm is not None else None

    def status(self, user: str, host: str | None = None) -> SlashReply:
        """Each host (or ``host``): its GPUs and disks read now, and its open incidents,
        as ``/ir help`` promises; the hosts are read in parallel."""
        if host is not None and host not in self._hosts:
            return SlashReply(strings.STATUS_UNKNOWN_HOST.format(host=host))
        hosts = [host] if host is not None else sorted(self._hosts)
        if not hosts:
            return SlashReply(strings.STATUS_NO_HOSTS)
        open_ = self._incidents.list(open_only=True)
        said = {h: [f"{i.id} {i.kind} ({i.state.value.replace('_', ' ')})"
                    for i in open_ if i.host == h] for h in hosts}
        if self._glance is None:
            return SlashReply("\n".join(f"*{h}*: {', '.join(said[h]) or 'no incidents'}"
                                        for h in hosts))
        with ThreadPoolExecutor(min(len(hosts), STATUS_PARALLEL),
                                thread_name_prefix="ir-status") as ex:
            seen = list(ex.map(self._glance, hosts))
        return SlashReply("\n\n".join(host_status(g, said[g.host]) for g in seen))

    def incidents(self, user: str) -> SlashReply:
        rows = [f"{i.id} · {i.host} · {i.kind} · {i.state.value} · ×{i.count}"
                for i in self._incidents.list(open_only=True, limit=30)]
        return SlashReply("\n".join(rows) or "No open incidents.")

    def diag(self, user: str, host: str, playbook: str | None) -> SlashReply:
        if host not in self._hosts:
            return SlashReply(f"`{host}` is not in the inventory.")
        kind = playbook or AUTO  # the playbook the host's state calls for (a full disk too)
        alert = Alert(source="slash", host=host, kind=kind, summary=DIAG_SUMMARY,
                      labels={REQUESTED_BY: user})
        incident_id, created = self._opens([alert]).opened(alert)
        incident = self._incidents.require(incident_id)
        if created:
            threading.Thread(target=self._post, args=(incident.id,), daemon=True).start()
        verb = "opened" if created else "already open as"
        return SlashReply(f"Diagnosis of {host} {verb} {incident.id}.", in_channel=created)

    def _post(self, incident_id: str) -> None:
        """The diagnosis ``/ir diag`` asked for, off the request thread. A failure (Slack
        or Redis down) is logged with an id, not left to kill the thread with a traceback;
        the incident keeps the state it reached, and Retry or the next alert goes on."""
        try:  # the consumer may take the same incident.opened first: one diagnosis
            self._diagnose.on_opened(incident_id, only_from=FIRST_DIAGNOSIS)
        except StepTaken:
            return
        except Exception as exc:  # a background thread: log, never raise
            log_internal(exc, f"/ir diag {incident_id}")

    def decide(self, user: str, verb: str, incident_id: str, duration_s: int, *,
               channel: str = "") -> SlashReply:
        """``/ir ack|resolve|snooze ID``: the same decision as the message's buttons; the
        flow's answer is said privately in ``channel``, where it was typed."""
        if self._decide is None:
            return SlashReply(f"`{verb}` is not available on this bot.")
        return SlashReply(self._decide(verb, incident_id, user, duration_s, channel=channel))

    def evidence(self, user: str, incident_id: str) -> SlashReply:
        """``/ir evidence ID`` and the "Raw evidence" button: probe output in the thread."""
        return SlashReply(self._publisher.post_raw_evidence(incident_id))

    def jobs(self, user: str) -> SlashReply:
        rows = [progress_text(s) for s in self._jobs.list()[:20]]
        return SlashReply("\n".join(rows) or "No extraction jobs.")

    def job(self, user: str, job_id: str) -> SlashReply:
        return SlashReply(progress_text(self._jobs.status(job_id)))

    def silence(self, user: str, host: str, kind: str, duration_s: int) -> SlashReply:
        silence = self._silences.add(host, kind, duration_s, author=user)
        return SlashReply(f"Silenced {host}/{kind} until <!date^{int(silence.until)}^"
                          f"{{date_short_pretty}} {{time}}|{int(silence.until)}> by <@{user}>.")

    def digest_now(self, user: str) -> SlashReply:
        if self._digest_now is None:
            return SlashReply("Digests are not configured on this bot.")
        threading.Thread(target=self._digest_now, daemon=True).start()
        return SlashReply("Posting the digest now.")

    def stats(self, user: str, window_s: int) -> SlashReply:
        """``/ir stats [7d]``: MTTA, MTTR and the one-click share per kind and per host."""
        if self._stats is None:
            return SlashReply(strings.SLASH_UNAVAILABLE.format(name="stats"))
        return SlashReply(self._stats(window_s))

    def drained(self, user: str) -> SlashReply:
        """``/ir drained``: the Slurm nodes out of the scheduler, read from the cluster now
        (through the flow's Slurm step, which the act step holds)."""
        if self._drained is None:
            return SlashReply(strings.SLASH_UNAVAILABLE.format(name="drained"))
        return SlashReply(drained_report(self._drained, time.time()))
