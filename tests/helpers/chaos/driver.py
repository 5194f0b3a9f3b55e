"""Alertmanager and the people in Slack, for a chaos run.

Each host runs its incidents one after another: arm the condition (vLLM holds the GPUs),
send the firing alert until it is answered 2xx (a 503 or an unreachable replica is tried
again on the other one, as Alertmanager behind a load balancer would; every answer is
kept), then act as the on-call would on what the message offers: approve, deny, retry a
failed diagnosis, or fix the host by hand; then send the resolved alert and wait until the
incident's message shows its final state, before arming the host again. Its thread replies
(evidence, the action's result, the postmortem) may still wait for Slack's channel budget
then: they are owed, and the run checks that they all arrived once it ends.

The driver's bounds count as the checker's invariant 2 does: from the later of when the
bot came to owe something and the heal of the last fault that could hold this incident up
(``Fault.holds_up``), and not at all while such a fault is active, with a hard ceiling per
arming so a run never hangs. Every choice comes from the run's seed. Redis is read for
where the incident is; nothing is written there but through the bot.
"""

from __future__ import annotations

import json
import random
import threading
import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

import httpx

from bot.chat.outbox import CARD
from bot.domain.incident import Incident
from bot.domain.lifecycle import TRANSIENT, IncidentState, is_terminal
from bot.rig.signed import sign
from storage.chat_outbox import ChatOutboxStore
from tests.fixtures.alerts import am_alert, am_payload
from tests.fixtures.slack_payloads import block_actions, find_button
from tests.helpers.chaos.faults import Fault, quiet_since
from tests.helpers.chaos.world import Host, World
from tests.helpers.serve_process import ALERT_TOKEN, CHANNEL, SIGNING_SECRET

S = IncidentState
# one incident from arming to its final message, counted from the arming or from the heal
# of the last fault that could hold it up, whichever is later (``Fault.holds_up``)
ARMING_TIMEOUT_S = 240.0
# whatever the faults: past this an arming is recorded stuck, so a run of back-to-back
# faults (each restarting the clocks above) still ends
ARMING_CEILING_S = 900.0
REPEAT_S = 15.0  # Alertmanager's repeat of a firing alert nobody answered with a message
# once the on-call has done their part (the alert resolved, or the incident ended), what the
# bot still owes (closing it, its message's final state) is due within the step deadline
# (acting_s 30 s in the run's config) plus one period and the outbox's backoff, counted
# from then or from the heal of the last fault that could hold it up, whichever is later;
# past that the arming is recorded as stuck (a checker violation) and the host moves on, so
# one incident the bot never settles cannot hold up every later one
OWED_S = 60.0
LOST = Incident(id="lost", host="", kind="")  # the incident Redis no longer has
DECISIONS = ("approve", "approve", "approve", "approve", "approve", "deny", "by_hand")


def overdue(faults: list[Fault], host: str, outcome: str, armed: float, owed_since: float,
            now: float) -> str:
    """Why an arming on ``host`` is past its bounds, '' while it is not (monotonic times;
    ``owed_since`` 0.0 while the on-call is not done). Each bound counts from the later of
    its own start and the last heal of a fault that could hold this incident up (the
    checker's invariant 2), and not at all while one is active; the ceiling counts from
    the arming whatever the faults."""
    last = outcome or "not found"
    if now - armed > ARMING_CEILING_S:
        return f"not closed within the {ARMING_CEILING_S:.0f}s ceiling (last {last})"
    quiet = quiet_since(faults, host)
    if quiet is None:  # a fault in its way is active: the clocks have not started
        return ""
    if owed_since and now - max(owed_since, quiet) > OWED_S:
        return (f"the bot owed it for {now - owed_since:.0f}s after the on-call was done, "
                f"{now - max(owed_since, quiet):.0f}s after the last fault in its way "
                f"(last {last})")
    if now - max(armed, quiet) > ARMING_TIMEOUT_S:
        return (f"not closed within {ARMING_TIMEOUT_S:.0f}s of its arming and the last "
                f"fault in its way ({now - armed:.0f}s since armed; last {last})")
    return ""


@dataclass
class Arming:
    """One incident of the run, as the driver lived it."""

    host: str
    n: int
    decision: str
    armed_at: float = 0.0  # wall
    done_at: float = 0.0
    incidents: list[str] = field(default_factory=list)  # ids in the order they appeared
    alert_answers: list[int] = field(default_factory=list)  # the first delivery's tries
    approves: int = 0  # Approve clicks answered 200
    clicks: list[tuple[str, int]] = field(default_factory=list)
    outcome: str = ""
    stuck: str = ""  # why the driver gave up on it, when it did

    @property
    def fingerprint(self) -> str:
        return f"chaos-{self.host}-{self.n}"


@dataclass
class Driver:
    world: World
    seed: int
    # the run's faults, the fault thread filling in their times as it goes (``run.py``)
    faults: list[Fault] = field(default_factory=list)
    answers: list[tuple[str, int]] = field(default_factory=list)  # (route, status), all
    armings: list[Arming] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _stop: threading.Event = field(default_factory=threading.Event)
    _outbox: ChatOutboxStore = field(init=False)

    def __post_init__(self) -> None:
        self._outbox = ChatOutboxStore(self.world.store.redis)

    def run_host(self, host: Host, numbers: list[int]) -> None:
        http = httpx.Client(timeout=15)
        try:
            for n in numbers:
                if self._stop.is_set():
                    return
                # one stream per arming: seeded per host only, every arming of a host (each
                # run_host call is one) made the same choice, and a run never mixed them
                rng = random.Random(f"{self.seed}:{host.name}:{n}")
                arming = Arming(host.name, n, rng.choice(DECISIONS))
                with self._lock:
                    self.armings.append(arming)
                self._one(host, arming, rng, http)
        finally:
            http.close()

    def stop(self) -> None:
        self._stop.set()

    # --- one incident ------------------------------------------------------------------
    def _one(self, host: Host, a: Arming, rng: random.Random, http: httpx.Client) -> None:
        host.arm()
        a.armed_at = time.time()
        armed = time.monotonic()
        a.alert_answers = self._deliver(http, rng, a, "firing")
        decided = retried = False
        acted = resolved_sent = 0.0
        repeat_at = time.monotonic() + REPEAT_S
        owed_since = 0.0
        while not self._stop.is_set():
            time.sleep(0.3)
            now = time.monotonic()
            a.stuck = overdue(self.faults, host.name, a.outcome, armed, owed_since, now)
            if a.stuck:
                return
            incident = self._current(host.name, a)
            if incident is LOST and resolved_sent:  # gone with Redis's data, and cleared
                a.done_at = time.time()
                return
            if incident is None or incident is LOST:  # not there yet, or lost with the data
                if not resolved_sent and now >= repeat_at:  # Alertmanager repeats it
                    self._deliver(http, rng, a, "firing")
                    repeat_at = now + REPEAT_S
                continue
            a.outcome = incident.state.value
            if incident.state in TRANSIENT or now - acted < 6.0:
                continue
            if is_terminal(incident.state):
                if self._delivered(incident):
                    a.done_at = time.time()
                    return
                owed_since = owed_since or now
                if host.condition() and now - resolved_sent > 10.0:  # denied, expired
                    resolved_sent = self._clear(http, rng, host, a)
                continue
            if incident.state is S.AWAITING_APPROVAL and not decided and \
                    a.decision in ("approve", "deny"):
                if self._decide(a, incident, rng):
                    decided, acted = True, now
                continue
            if incident.state is S.DIAGNOSIS_FAILED and not retried:
                retried = True
                if self._click(a, incident, "incident_retry", rng):
                    acted = now
                    continue
            if now - resolved_sent > 10.0:  # fixed, by the bot or by hand: the alert clears
                resolved_sent = self._clear(http, rng, host, a)
                owed_since = owed_since or resolved_sent
        a.stuck = f"the run ended before it closed (last {a.outcome or 'not found'})"

    def _clear(self, http: httpx.Client, rng: random.Random, host: Host, a: Arming) -> float:
        """The on-call fixes what is still wrong by hand; the alert then resolves."""
        if host.condition():
            host.fix_by_hand()
        self._deliver(http, rng, a, "resolved")
        return time.monotonic()

    def _decide(self, a: Arming, incident: Incident, rng: random.Random) -> bool:
        if a.decision == "approve":
            return self._click(a, incident, "approve", rng)
        return self._deny(a, incident, rng)

    # --- Alertmanager ----------------------------------------------------------------------
    def _deliver(self, http: httpx.Client, rng: random.Random, a: Arming,
                 status: str) -> list[int]:
        """One delivery, tried until a replica answers 2xx; every answer kept."""
        alert = am_alert(a.host, "GpuMemoryHeldIdle", status=status, fp=a.fingerprint,
                         chaos=f"c{a.n:04d}")
        body = am_payload(alert, status=status)
        tried: list[int] = []
        wait = 0.5
        while not self._stop.is_set():
            serve = rng.choice(self.world.serves)
            try:
                answer = http.post(f"{serve.url}/alerts/alertmanager", json=body,
                                   headers={"Authorization": f"Bearer {ALERT_TOKEN}"})
                code = answer.status_code
            except httpx.HTTPError:
                code = 0  # no answer (a replica down or stopped)
            tried.append(code)
            self._answer("/alerts/alertmanager", code)
            if 200 <= code < 300:
                with self._lock:
                    a.incidents.extend(i for i in answer.json().get("incidents", [])
                                       if i not in a.incidents)
                return tried
            time.sleep(wait)
            wait = min(5.0, wait * 1.5)
        return tried

    # --- the people in Slack -----------------------------------------------------------------
    def _card(self, incident: Incident) -> dict[str, Any] | None:
        chat = incident.chat
        if chat is None:
            return None
        message = self.world.standin.messages.get((chat.channel, chat.ts))
        return dict(message) if message is not None else None

    def _click(self, a: Arming, incident: Incident, prefix: str, rng: random.Random) -> bool:
        card = self._card(incident)
        if card is None or f'"{prefix}' not in json.dumps(card):
            return False
        block_id, button = find_button(
            card, lambda el: str(el.get("action_id", "")).startswith(prefix))
        payload = block_actions(card, CHANNEL, "UALICE", block_id, button,
                                self.world.standin.base)
        code = self._signed(rng, urlencode({"payload": json.dumps(payload)}))
        a.clicks.append((prefix, code))
        if prefix == "approve" and code == 200:
            a.approves += 1
        return code == 200

    def _deny(self, a: Arming, incident: Incident, rng: random.Random) -> bool:
        card = self._card(incident)
        if card is None or '"deny' not in json.dumps(card):
            return False
        block_id, button = find_button(
            card, lambda el: str(el.get("action_id", "")).startswith("deny"))
        payload = block_actions(card, CHANNEL, "UALICE", block_id, button,
                                self.world.standin.base)
        code = self._signed(rng, urlencode({"payload": json.dumps(payload)}))
        a.clicks.append(("deny", code))
        if code != 200:
            return False
        view = self._opened(payload["trigger_id"])
        if view is None:
            return False
        submit = {"type": "view_submission", "team": {"id": "T0001"},
                  "user": {"id": "UALICE"}, "api_app_id": "A0001", "token": "legacy",
                  "trigger_id": f"{payload['trigger_id']}.submit",
                  "view": {"id": "V1", "type": "modal", "callback_id": view["callback_id"],
                           "private_metadata": view["private_metadata"], "team_id": "T0001",
                           "state": {"values": {"reason": {"reason_input": {
                               "type": "plain_text_input", "value": "chaos: not now"}}}}}}
        code = self._signed(rng, urlencode({"payload": json.dumps(submit)}))
        a.clicks.append(("deny_submit", code))
        return code == 200

    def _opened(self, trigger_id: str, timeout_s: float = 15.0) -> dict[str, Any] | None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            for call in self.world.standin.calls_of("views.open"):
                if call.params.get("trigger_id") == trigger_id:
                    view = call.params.get("view")
                    return json.loads(view) if isinstance(view, str) else dict(view or {})
            time.sleep(0.2)
        return None

    def _signed(self, rng: random.Random, body: str) -> int:
        serve = rng.choice(self.world.serves)
        stamp = str(int(time.time()))
        try:
            answer = httpx.post(f"{serve.url}/slack/events", content=body.encode(), timeout=10,
                                headers={"Content-Type": "application/x-www-form-urlencoded",
                                         "X-Slack-Request-Timestamp": stamp,
                                         "X-Slack-Signature": sign(SIGNING_SECRET, stamp,
                                                                   body)})
            code = answer.status_code
        except httpx.HTTPError:
            code = 0
        self._answer("/slack/events", code)
        return code

    def _answer(self, route: str, code: int) -> None:
        with self._lock:
            self.answers.append((route, code))

    # --- reading where things are ----------------------------------------------------------
    def _current(self, host: str, a: Arming) -> Incident | None:
        """The host's open incident, else the last one this arming saw (it closed); ``LOST``
        when Redis answers that it has no such incident any more; None when Redis does
        not answer."""
        try:
            # this arming's own: its alert's fingerprint (a re-opened one keeps it), or an id
            # seen; an older arming's incident re-opened after a data loss is not this one
            found = [i for i in self.world.store.list(open_only=True) if i.host == host
                     and (a.fingerprint in i.fingerprints or i.id in a.incidents)]
            if found:
                incident = found[-1]
                if incident.id not in a.incidents:
                    with self._lock:
                        a.incidents.append(incident.id)
                return incident
            if not a.incidents:
                return None
            return self.world.store.get(a.incidents[-1]) or LOST
        except Exception:  # Redis stopped, refusing, restarting: look again
            return None

    def _delivered(self, incident: Incident) -> bool:
        """The incident's message shows its final state and no edit of it is queued behind
        that: the host can be armed again, and no late "Fixed" can land on it. Its thread
        replies may still wait for Slack's channel budget (about one post a second, shared
        by every incident); they are owed, not lost, and the run's end checks them."""
        card = self._card(incident)
        label = incident.state.value.replace("_", " ").capitalize()
        if card is None or \
                f"{label} · incident {incident.id}" not in json.dumps(card, ensure_ascii=False):
            return False
        try:
            queued = self._outbox.pending_items(incident.id)
        except Exception:  # Redis refusing or restarting: look again
            return False
        return not any(purpose == CARD for _, _, purpose, _ in queued)
