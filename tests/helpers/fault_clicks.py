"""What an on-call does to a fault host's message, through one real ``serve``, and what the
host shows afterwards, read from the sim's own state file (never from the bot).

One serve holds every (sequence, fault host) pair as its own simulated host (inventory
name ``<sequence>-<scenario>``), so the sequences never share a host's state; each
sequence runs over its fault hosts at once (threads) and returns one ``Settled`` per host
for the tests (``tests/integration/test_fault_joints.py``) and for ``scripts/headlines.py``
to read. The sequences an on-call would go through:

- ``chain``: Approve the first proposal; Revert; a click on a follow-up the Revert
  withdrew (from the message as it was before the Revert: a stale copy in someone's
  Slack); then the alert clears (on a host with nothing to approve: the alert clears);
- ``down``, ``frozen``, ``rekeyed``: the host's sshd killed with its sessions, stopped
  (SIGSTOP of the sshd and its sessions) or replaced by one with another host key between
  the message and the Approve click;
- ``cleared``: the alert clears before anything is clicked.

Nothing here sleeps for a moment: every wait is for a state, with a deadline.
"""

from __future__ import annotations

import json
import os
import shlex
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bot.chat.render import render_incident
from bot.domain.incident import Incident
from bot.rig.localredis import LocalRedis, start_local_redis
from bot.rig.signed import SignedSender
from bot.rig.slack_standin import SlackStandIn
from bot.sim import engine
from bot.sim.sandbox import root_of
from bot.sim.sshd import SimHost, start_sim
from bot.sim.tools.disk import mount_of
from storage.approvals import ApprovalStore
from storage.chat_outbox import ChatOutboxStore
from storage.connection import connect
from storage.incidents import IncidentStore
from tests.fixtures.alerts import am_alert, am_payload
from tests.fixtures.slack_payloads import block_actions, find_button, form
from tests.helpers.fault_hosts import expected_gpus
from tests.helpers.fault_serve import alert_for, visible
from tests.helpers.serve_process import (
    BOT_TOKEN,
    CHANNEL,
    SIGNING_SECRET,
    ServeProcess,
    wait_until,
)

APPROVER = "UALICE"
SEQUENCES = ("chain", "down", "frozen", "rekeyed", "cleared")
HELD_MIB = 1024  # a GPU holding this much at 0% is held (the playbooks' own floor)
FULL_FRACTION = 0.05  # a filesystem with less than this free for users is full
SETTLE_S = 300.0  # Slack's pace (a post a second per channel) with every host in one channel
# tools whose call changes the host (a read never does)
CHANGES = {"systemctl": {"stop", "disable", "start", "enable", "mask", "unmask", "restart",
                         "daemon-reload", "kill"},
           "kill": None, "rm": None, "truncate": None, "nvidia-smi": {"-r", "--gpu-reset"},
           "journalctl": {"--vacuum-size", "--vacuum-time"}, "reboot": None, "tee": None,
           "docker": {"stop", "kill", "update", "rm"}, "scontrol": {"update"}}


def host_shows(sim: SimHost) -> list[str]:
    """What is wrong on the host, from its own state: GPUs held at 0% by a process, GPUs
    wedged (memory held by no process), a broken, lost or missing GPU, a GPU tool that
    cannot answer, a full filesystem. Empty: the host is as a healthy one."""
    state = sim.state()
    _release_deleted(sim, state)
    out: list[str] = []
    for gpu in state["gpus"]:
        i = gpu["index"]
        if gpu.get("lost"):
            out.append(f"GPU {i} fell off the bus")
        if not gpu.get("visible", True):
            out.append(f"GPU {i} is missing")
        if gpu.get("ecc_errors"):
            out.append(f"GPU {i} has {gpu['ecc_errors']} uncorrectable ECC errors")
        if gpu.get("remap_failure"):
            out.append(f"GPU {i} failed a row remap")
        idle = gpu.get("visible", True) and not gpu.get("utilization_gpu")
        procs = engine.gpu_processes(state, i)
        held = sum(mib for _, mib in procs)
        if idle and held >= HELD_MIB:
            by = ", ".join(_holder(p) for p, _ in procs)
            out.append(f"GPU {i} holds {held} MiB at 0% (by {by})")
        if idle and gpu.get("memory_reserved_mib", 0) >= HELD_MIB:
            out.append(f"GPU {i} wedged: {gpu['memory_reserved_mib']} MiB held by no process")
    nvidia = state["nvidia"]
    if nvidia.get("hang_s"):
        out.append("nvidia-smi hangs")
    if nvidia.get("library_version") and nvidia["library_version"] != nvidia["driver_version"]:
        out.append("NVML driver/library mismatch")
    for fs in state["filesystems"]:
        room = fs["size"] * (1 - fs.get("reserved_pct", 0.0) / 100) - fs["used"]
        if fs["type"] not in ("tmpfs", "nfs4") and room < fs["size"] * FULL_FRACTION:
            out.append(f"{fs['mount']} is full")
    return out


def _release_deleted(sim: SimHost, state: dict[str, Any]) -> None:
    """A scenario file deleted in the host's sandbox gives its bytes back to its mount, as
    the host's own df says (``bot.sim.tools.disk.release_deleted``, which runs in the
    sandbox): read here through the sshd's mount namespace (``/proc/PID/root``). A host
    whose sshd is gone is left as its state file says (full stays full)."""
    root = root_of(sim.workdir)
    base = Path(f"/proc/{sim.pid}/root") / (root or "").lstrip("/")
    if root is None or sim.pid <= 0 or not base.is_dir():
        return
    for f in state.get("files") or []:
        fs = mount_of(state["filesystems"], f["path"])
        if fs is not None and not os.path.lexists(base / f["path"].lstrip("/")):
            fs["used"] = max(fs["used"] - int(f["size"]), 0)


def _holder(proc: dict[str, Any]) -> str:
    """A GPU holder as the headline would name it: its unit or container, else its PID."""
    owner = proc.get("owner") or {}
    return str(owner.get("name") or f"PID {proc['pid']}")


def holders_of(shown: str) -> list[str]:
    """The holders a ``host_shows`` line names ("GPU 0 holds 2048 MiB at 0% (by PID 3391)")."""
    _, by, names = shown.rpartition(" (by ")
    return names.rstrip(")").split(", ") if by else []


def changes_since(sim: SimHost, mark: int) -> list[str]:
    """The calls that change the host after log entry ``mark``: a simulated tool's own
    entry, or a session's command line where the tool is the host's own (``rm`` runs in
    the sandbox unshimmed: only the session logs it)."""
    out = []
    for entry in sim.command_log()[mark:]:
        tool, argv = entry.get("tool"), entry.get("argv") or []
        if tool is None:
            argv = _remote_argv(str(entry.get("command") or ""))
            tool, argv = (argv[0], argv[1:]) if argv else (None, [])
            if tool is None or (Path(sim.workdir) / "bin" / tool).exists():
                continue  # a simulated tool logs its own call
        if tool not in CHANGES:
            continue
        verbs = CHANGES[tool]
        if verbs is None or any(a.split("=")[0] in verbs for a in argv[:3]):
            out.append(" ".join([str(tool), *map(str, argv)])[:200])
    return out


def _remote_argv(command: str) -> list[str]:
    """The argv a session ran, unwrapped from the runner's ``[sudo -n] timeout -k 2 N sh -c
    CMD`` (``bot/ssh/channel.py``); [] for what does not parse as one command."""
    try:
        words = shlex.split(command)
    except ValueError:
        return []
    if words[:2] == ["sudo", "-n"]:
        words = words[2:]
    if len(words) == 7 and words[0] == "timeout" and words[4:6] == ["sh", "-c"]:
        try:
            words = shlex.split(words[6])
        except ValueError:
            return []
    return words


@dataclass
class Snapshot:
    """The message and the host at one moment of a sequence."""

    state: str  # the incident's state
    text: str  # the message, every visible line
    lead: str  # its first line (without the host)
    shows: list[str]  # the host's condition then (its own state file)
    changed: list[str]  # what the host ran that changes it, during this step
    buttons: list[str]


@dataclass
class Settled:
    """One host through one sequence: its first message, then a snapshot after each step
    (``approve``, ``revert``, ``stale follow-up``, ``alert cleared``, ``click``)."""

    sequence: str
    scenario: str
    first: str = ""  # the first message's headline
    proposed: str = ""  # its first proposal, as a sentence ("" when nothing is proposed)
    clicked: bool = False  # an Approve was there to click
    steps: dict[str, Snapshot] = field(default_factory=dict)
    thread: list[str] = field(default_factory=list)

    @property
    def last(self) -> Snapshot | None:
        return list(self.steps.values())[-1] if self.steps else None


@dataclass
class Joints:
    redis: LocalRedis
    standin: SlackStandIn
    serve: ServeProcess
    store: IncidentStore
    sims: dict[str, SimHost]  # host name -> sim
    scenarios: dict[str, str]  # host name -> scenario
    outbox: ChatOutboxStore
    approvals: ApprovalStore

    # --- what the on-call reads ---------------------------------------------------------
    def card(self, incident_id: str) -> dict[str, Any]:
        chat = self.store.require(incident_id).chat
        if chat is None:
            return {}
        return dict(self.standin.messages.get((chat.channel, chat.ts), {}))

    def text(self, incident_id: str) -> str:
        return "\n".join(visible(self.card(incident_id)))

    def lead(self, incident_id: str) -> str:
        """The first line, bold marks and the host dropped."""
        lines = visible(self.card(incident_id))
        first = lines[0].strip("*") if lines else ""
        host = self.store.require(incident_id).host
        return first.split(": ", 1)[1] if first.startswith(host + ":") else first

    def thread(self, incident_id: str) -> list[str]:
        chat = self.store.require(incident_id).chat
        if chat is None:
            return []
        return ["\n".join(visible(m)) for (c, _), m in sorted(self.standin.messages.items())
                if c == chat.channel and m.get("thread_ts") == chat.ts]

    def has_button(self, incident_id: str, prefix: str) -> bool:
        return any(str(el.get("action_id", "")).startswith(prefix)
                   for b in self.card(incident_id).get("blocks") or []
                   if b.get("type") == "actions" for el in b.get("elements", []))

    # --- what the on-call does ----------------------------------------------------------
    def alert(self, host: str, status: str = "firing") -> None:
        alert = am_alert(host, alert_for(self.scenarios[host]), status=status,
                         **({"mountpoint": "/data"}
                            if self.scenarios[host].startswith("disk") else {}))
        response = self.serve.post_alert(am_payload(alert, status=status))
        assert response.status_code == 200, response.text

    def first(self, host: str, timeout_s: float = SETTLE_S) -> Incident:
        """The host's incident once diagnosed and its message shows the diagnosis."""
        found: list[Incident] = []

        def ready() -> bool:
            found[:] = [i for i in self.store.list() if i.host == host and i.chat is not None
                        and i.state.value in ("awaiting_approval", "no_action",
                                              "diagnosis_failed", "resolved")
                        and "diagnosing" not in self.text(i.id).lower()]
            return bool(found)

        assert wait_until(ready, timeout_s), (host, self.serve.log()[-3000:])
        return found[0]

    def click(self, incident_id: str, prefix: str, message: Mapping[str, Any] | None = None,
              user: str = APPROVER) -> int:
        """``user`` clicks the first button whose action id starts with ``prefix`` on the
        message as it is now (or as ``message`` was: a stale copy); the HTTP status."""
        shown = dict(message) if message is not None else self.card(incident_id)
        block_id, button = find_button(
            shown, lambda el: str(el.get("action_id", "")).startswith(prefix))
        payload = block_actions(shown, CHANNEL, user, block_id, button, self.standin.base)
        sender = SignedSender(f"{self.serve.url}/slack/events", SIGNING_SECRET,
                              self.standin.base)
        try:
            return int(sender.post(form(payload)).status_code)
        finally:
            sender.close()

    def buttons(self, incident_id: str) -> list[str]:
        return [el["text"]["text"] for b in self.card(incident_id).get("blocks") or []
                if b.get("type") == "actions" for el in b.get("elements", [])]

    def settle(self, incident_id: str, timeout_s: float = SETTLE_S) -> Incident:
        """Wait until the action step is over (state left acting, no running mark)."""
        def done() -> bool:
            i = self.store.require(incident_id)
            return i.state.value not in ("approved", "remediating") and i.running is None

        assert wait_until(done, timeout_s), (incident_id, self.store.require(incident_id),
                                             self.serve.log()[-3000:])
        self.delivered(incident_id)
        return self.store.require(incident_id)

    def delivered(self, incident_id: str, timeout_s: float = SETTLE_S) -> None:
        """Wait until the message Slack holds is the stored state's render (its headline
        and state line, rendered here from the same record: a pure function of it) and
        nothing the bot queued for the incident is still waiting (the outbox paces posts
        at Slack's rate)."""
        def shown() -> bool:
            blocks = self.card(incident_id).get("blocks") or []
            heads = [str(b["text"]["text"]) for b in blocks[:2]
                     if isinstance(b.get("text"), Mapping)]
            return heads == self.expected(incident_id) and not self.outbox.pending(incident_id)

        assert wait_until(shown, timeout_s), (self.expected(incident_id),
                                              self.outbox.pending_items(incident_id))

    def expected(self, incident_id: str) -> list[str]:
        """The headline and state line the stored incident renders to now."""
        i = self.store.require(incident_id)
        if i.diagnosis is None:
            return []
        ids = [p.approval_id for p in i.plans] + ([i.revert_plan.approval_id]
                                                  if i.revert_plan else [])
        approvals = {a: got for a in ids if (got := self.approvals.get(a)) is not None}
        message = render_incident(i, i.diagnosis, list(i.plans), approvals, i.results,
                                  i.revert_plan, now=i.updated or 0.0)
        return [sec.text for sec in message.sections[:2]]

    def rendered(self, incident_id: str, want: Callable[[str], bool],
                 timeout_s: float = 60.0) -> bool:
        """Wait until the message Slack holds reads as ``want`` says."""
        return wait_until(lambda: want(self.text(incident_id)), timeout_s)


def host_of(sequence: str, scenario: str) -> str:
    return f"{sequence.replace('_', '-')}-{scenario.replace('_', '-')}"


@contextmanager
def joints_serve(workdir: Path, scenarios: list[str],
                 sequences: tuple[str, ...] = SEQUENCES,
                 only: Mapping[str, list[str]] | None = None) -> Iterator[Joints]:
    """One serve with a host per (sequence, scenario), a sequence named in ``only`` on
    those of ``scenarios`` only (a host nothing drives costs a sshd and a serve's warm
    connection for nothing); stopped by PID at the end."""
    server = start_local_redis(workdir / "redis")
    standin = SlackStandIn(token=BOT_TOKEN).start()
    serve = ServeProcess(workdir / "bot.yaml", server.url, workdir / "serve.log")
    sims: dict[str, SimHost] = {}
    names: dict[str, str] = {}
    client = None
    try:
        for seq in sequences:
            for scenario in scenarios:
                if only is not None and seq in only and scenario not in only[seq]:
                    continue
                host = host_of(seq, scenario)
                sims[host] = start_sim(scenario, workdir=workdir / f"sim-{host}")
                names[host] = scenario
        hosts = {h: _host(names[h], s) for h, s in sims.items()}
        serve.config.write_text(json.dumps({
            "http": {"host": "127.0.0.1", "port": serve.port}, "hosts": hosts,
            "alerts": {"group_wait_s": 0},
            "ssh_defaults": {"connect_timeout_s": 3},
            "slack": {"channel": CHANNEL, "approvers": [APPROVER], "api_url": standin.api_url},
            # the leader's sweep settles a reboot once the host is back (every second here);
            # nothing else it runs is wanted here
            "extra": {"scheduler": {"jobs": {
                "approval_expiry": {"every_s": 1}, "progress": {"every_s": 3600},
                "escalation": {"every_s": 3600}, "sampling": {"every_s": 3600}}},
                      "diagnostics": {"samples": 2, "sample_interval_s": 0.1,
                                      "command_timeout_s": 3.0},
                      "remediation": {"verify_timeout_s": 8, "settle_s": 0.3,
                                      "poll_interval_s": 0.1}}}))
        client = connect(server.url)
        yield Joints(server, standin, serve.start(), IncidentStore(client), sims, names,
                     ChatOutboxStore(client), ApprovalStore(client))
    finally:
        serve.stop()
        if client is not None:
            client.close()
        for sim in sims.values():
            sim.thaw()  # a frozen sshd would not stop
            sim.stop()
        standin.stop()
        server.stop()


# what a real inventory says of a fault host beyond its address (the login's sudo)
HOST_FIELDS: dict[str, dict[str, Any]] = {"sudo_refused": {"sudo": True}}


def _host(scenario: str, sim: SimHost) -> dict[str, Any]:
    gpus = expected_gpus(scenario)
    return {"ssh": sim.target, "key": str(sim.key_path), "known_hosts": str(sim.known_hosts_path),
            **({"gpus": gpus} if gpus else {}), **HOST_FIELDS.get(scenario, {})}


# --- the sequences ----------------------------------------------------------------------

def run(rig: Joints, sequence: str, scenarios: list[str]) -> dict[str, Settled]:
    """``sequence`` over the given fault hosts at once; one ``Settled`` per scenario."""
    step = STEPS[sequence]
    hosts = [host_of(sequence, s) for s in scenarios]
    for host in hosts:
        rig.alert(host)
    with ThreadPoolExecutor(max_workers=len(hosts) or 1, thread_name_prefix=sequence) as pool:
        done = list(pool.map(lambda h: step(rig, h), hosts))
    return {s.scenario: s for s in done}


class _Walk:
    """One host's sequence: its incident, and a snapshot after each step."""

    def __init__(self, rig: Joints, host: str, sequence: str) -> None:
        self.rig, self.host, self.sim = rig, host, rig.sims[host]
        self.incident = rig.first(host)
        self.id = self.incident.id
        text = rig.text(self.id)
        proposals = [ln for ln in text.splitlines() if ln.startswith("*Proposed:*")]
        self.seen = Settled(sequence, rig.scenarios[host], first=rig.lead(self.id),
                            proposed=proposals[0].removeprefix("*Proposed:* ")
                            .split(" *Risk:*")[0] if proposals else "",
                            clicked=rig.has_button(self.id, "approve"))
        self.mark = len(self.sim.command_log())

    def snap(self, name: str) -> Snapshot:
        """Once the message Slack holds is the stored state's last render."""
        self.rig.delivered(self.id)
        i = self.rig.store.require(self.id)
        shot = Snapshot(i.state.value, self.rig.text(self.id), self.rig.lead(self.id),
                        host_shows(self.sim), changes_since(self.sim, self.mark),
                        self.rig.buttons(self.id))
        self.mark = len(self.sim.command_log())
        self.seen.steps[name] = shot
        self.seen.thread = self.rig.thread(self.id)
        return shot

    def approve(self, prefix: str = "approve") -> Snapshot:
        runs = self.started()
        assert self.rig.click(self.id, prefix) == 200
        assert wait_until(lambda: self.started() > runs or self.state() == "action_failed",
                          SETTLE_S), (self.host, self.rig.store.require(self.id))
        self.rig.settle(self.id)
        return self.snap(prefix)

    def started(self) -> int:
        return sum(1 for e in self.rig.store.audit.timeline(self.id)
                   if e.action in ("action.started", "action.skipped"))

    def state(self) -> str:
        return self.rig.store.require(self.id).state.value

    def clear_alert(self) -> Snapshot:
        audit = len(self.rig.store.audit.timeline(self.id))
        self.rig.alert(self.host, status="resolved")

        def closed_or_kept() -> bool:
            said = [e.action for e in self.rig.store.audit.timeline(self.id)[audit:]]
            return "alert.cleared" in said or "transition" in said

        assert wait_until(closed_or_kept, SETTLE_S), self.rig.store.require(self.id)
        return self.snap("alert cleared")


def chain(rig: Joints, host: str) -> Settled:
    """Approve; Revert; the follow-up the Revert withdrew, clicked from the message as it
    was before the Revert (a stale copy); then the alert clears. A host with nothing to
    approve: its alert clears."""
    walk = _Walk(rig, host, "chain")
    if walk.seen.clicked:
        walk.approve()
        if rig.has_button(walk.id, "revert"):
            before = rig.card(walk.id)
            walk.approve("revert")
            if '"approve' in json.dumps(before.get("blocks")):
                audit = len(rig.store.audit.timeline(walk.id))
                assert rig.click(walk.id, "approve", message=before) == 200
                assert wait_until(lambda: len(rig.store.audit.timeline(walk.id)) > audit, 30)
                walk.snap("stale follow-up")
    walk.clear_alert()
    return walk.seen


def _broken_at_click(how: str) -> Callable[[Joints, str], Settled]:
    def step(rig: Joints, host: str) -> Settled:
        walk = _Walk(rig, host, how)
        if not walk.seen.clicked:
            return walk.seen
        old = _break(walk.sim, how)
        try:
            walk.approve()
        finally:
            _mend(walk.sim, how, old)
        return walk.seen
    return step


def _break(sim: SimHost, how: str) -> bytes | None:
    if how == "down":
        sim.down()
    elif how == "frozen":
        sim.freeze()
    else:
        return sim.replace_host_key()
    return None


def _mend(sim: SimHost, how: str, old: bytes | None) -> None:
    if how == "down":
        sim.up()
    elif how == "frozen":
        sim.thaw()
    elif old is not None:
        sim.restore_host_key(old)


def cleared(rig: Joints, host: str) -> Settled:
    """The alert clears before anything is clicked."""
    walk = _Walk(rig, host, "cleared")
    walk.clear_alert()
    return walk.seen


STEPS: dict[str, Callable[[Joints, str], Settled]] = {
    "chain": chain, "down": _broken_at_click("down"), "frozen": _broken_at_click("frozen"),
    "rekeyed": _broken_at_click("rekeyed"), "cleared": cleared,
}
