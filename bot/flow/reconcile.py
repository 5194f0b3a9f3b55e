"""Every incident settles: re-drive work whose owner is gone or whose deadline passed.

Like rq's registry cleanup (``StartedJobRegistry.cleanup``) under its maintenance lock:
one replica per period (``InflightRegistry.claim_sweep``) reads the in-flight set and, for
each abandoned step, hands ``StepAbandoned`` to the flow runner with the entry it saw
(``FlowRunner.handle(..., expect=entry)``: the commit re-checks it under WATCH, and
``StepTaken`` when it changed). ``bot/domain/flow.py`` decides, purely:

- open or diagnosing: release the step (one attempt more, audited ``incident.redriven``)
  and ``rediagnose`` it: diagnosis only reads the host, so running it twice is harmless;
  past ``max_attempts`` interruptions the incident goes to ``diagnosis_failed`` with the
  reason, so its message shows Retry instead of "diagnosing" forever;
- approved or remediating: never run an action twice. The reconciler takes the step over
  (held for ``grace_s``: no second sweep does it too) and ``settle_action`` reads the host
  back with the action's own checks (``ActStep.settle_interrupted``): its effect is there,
  the incident is verified ("read back after the bot was interrupted"); not there or the
  host unreachable, it fails with Retry. One transition and one result line either way;
- an entry whose incident is gone or elsewhere is dropped.

A step that Redis refused to let finish (out of memory, read-only, loading, a timeout:
``storage.connection.refusal``) left its incident in its transient state while its owner
thread lives on; waiting for the deadline would hold it for minutes after Redis accepts
writes again. The step records itself in this process's ``CutShort`` instead, and every
replica re-drives its own refused steps each period (``local_pass``), whoever won the
sweep: within one period of Redis taking writes again.

What the reconciler does after the commit comes back as ``Handled.sweep`` (``SweepNext``).
Every collaborator is a parameter: the service wires them (no context bag).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from pydantic import Field, ValidationError

from bot.core import metrics
from bot.core.errors import ConfigError, log_internal
from bot.core.heartbeat import Heartbeats
from bot.core.schema import StrictModel
from bot.domain.flow import StepAbandoned, Then
from bot.domain.lifecycle import StepDeadlines, StepTaken
from bot.flow.runner import FlowRunner
from storage.audit import AuditLog
from storage.connection import refusal
from storage.incidents import IncidentStore, UnknownIncident
from storage.inflight import Inflight, step_owner

log = logging.getLogger(__name__)
ACTOR = "reconciler"


class ReconcileSettings(StrictModel):
    """``settings.extra["reconcile"]``: the sweep period and each transient state's deadline."""

    every_s: float = Field(default=15.0, gt=0, le=3600)
    max_attempts: int = Field(default=3, ge=1, le=20)
    open_s: float = Field(default=120.0, gt=0)
    diagnosing_s: float = Field(default=300.0, gt=0)
    acting_s: float = Field(default=900.0, gt=0)

    def deadlines(self) -> StepDeadlines:
        return StepDeadlines(self.open_s, self.diagnosing_s, self.acting_s)


def reconcile_settings(extra: dict[str, Any]) -> ReconcileSettings:
    """Validate ``extra.reconcile``; a one-line ``ConfigError`` naming the bad key."""
    try:
        return ReconcileSettings.model_validate(extra.get("reconcile") or {})
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"])
        raise ConfigError(f"key 'extra.reconcile.{where}': {err['msg']}") from None


class RedriveOutcome(StrEnum):
    REDIAGNOSED = "rediagnosed"
    GAVE_UP = "gave_up"
    READ_BACK = "read_back"  # an interrupted action settled from what the host shows
    LEFT = "left"  # taken over, but someone else settled it (or a reboot is pending)
    DROPPED = "dropped"  # the entry outlived its state: removed, nothing to do
    RACED = "raced"  # someone changed it between the look and the write: left alone


class CutShort:
    """Steps of this process that could not finish: Redis refused their writes (taken over
    at the next period, not at the step's deadline), or their host stopped answering part-way
    (``wait_for_host``: read back each period once it answers; at the deadline the sweep
    settles it as usual). Entries are (incident, the owner token the step held, why);
    thread-safe."""

    def __init__(self) -> None:
        self._steps: dict[str, tuple[str, str, bool]] = {}
        self._lock = threading.Lock()

    def add(self, incident_id: str, reason: str, owner: str | None = None, *,
            wait_for_host: bool = False) -> None:
        with self._lock:
            self._steps[incident_id] = (owner or step_owner(), reason, wait_for_host)

    def reason_for(self, entry: Inflight) -> str | None:
        """Why ``entry`` is abandoned, when its step is one a refusal cut short here (and
        nobody has taken it since: the same owner, or still released, as an ``open``
        incident whose first transition was refused is)."""
        with self._lock:
            found = self._steps.get(entry.incident_id)
        if found is None or found[2] or (entry.owner and found[0] != entry.owner):
            return None
        return f"interrupted by a Redis refusal ({found[1]})"

    def waiting_for_hosts(self) -> list[tuple[str, str]]:
        """(incident, why) of the steps waiting for their host to answer again."""
        with self._lock:
            return [(i, why) for i, (_, why, waits) in self._steps.items() if waits]

    def discard(self, incident_id: str) -> None:
        with self._lock:
            self._steps.pop(incident_id, None)

    def __bool__(self) -> bool:
        with self._lock:
            return bool(self._steps)

    def ids(self) -> set[str]:
        with self._lock:
            return set(self._steps)


@dataclass(frozen=True)
class Redrive:
    """What one sweep did to one incident, and why."""

    incident_id: str
    outcome: RedriveOutcome
    reason: str


def reconcile_once(runner: FlowRunner, incidents: IncidentStore, audit: AuditLog,
                   clock: Callable[[], float], *, rediagnose: Callable[[str], object],
                   settle_action: Callable[[str, str], bool], max_attempts: int = 3,
                   grace_s: float = 120.0, interrupted: CutShort | None = None,
                   only_interrupted: bool = False) -> list[Redrive]:
    """One sweep over the in-flight set (run it under ``claim_sweep``); with
    ``only_interrupted``, only this process's steps a refusal stopped (no claim needed:
    nobody else knows them)."""
    now = clock()
    done: list[Redrive] = []
    if only_interrupted and not interrupted:
        return done
    for entry in incidents.inflight.entries():
        cut = interrupted.reason_for(entry) if interrupted is not None else None
        reason = cut or (None if only_interrupted else entry.abandoned(now))
        if reason is None:
            continue
        event = StepAbandoned(now, ACTOR, entry.state, entry.attempts, reason,
                              max_attempts=max_attempts, hold_s=grace_s)
        try:
            done.append(_settle(runner, entry, event, rediagnose=rediagnose,
                                settle_action=settle_action))
            if interrupted is not None:  # taken over (a waiting host's: at its deadline)
                interrupted.discard(entry.incident_id)
        except Exception as exc:  # one incident must not stop the sweep
            if refusal(exc) is not None:  # Redis still refuses: next period, same step
                raise
            error_id = log_internal(exc, f"re-driving incident {entry.incident_id}")
            audit.append(entry.incident_id, ACTOR, "incident.redrive_failed",
                         {"reason": reason, "error_id": error_id})
    if interrupted is not None:  # what left its transient state meanwhile is done
        live = {e.incident_id for e in incidents.inflight.entries()}
        for gone in interrupted.ids() - live:
            interrupted.discard(gone)
    return done


def _settle(runner: FlowRunner, entry: Inflight, event: StepAbandoned, *,
            rediagnose: Callable[[str], object],
            settle_action: Callable[[str, str], bool]) -> Redrive:
    """``StepAbandoned`` decided and committed on the entry it saw, then what comes next."""
    incident_id, reason = entry.incident_id, event.reason
    try:
        handled = runner.handle(incident_id, event, expect=entry)
    except UnknownIncident:  # the runner dropped its entry
        return Redrive(incident_id, RedriveOutcome.DROPPED, reason)
    except StepTaken:
        return Redrive(incident_id, RedriveOutcome.RACED, reason)
    (after,) = handled.sweep
    if after.then is Then.DROP:  # the runner dropped the entry
        return Redrive(incident_id, RedriveOutcome.DROPPED, reason)
    if after.then is Then.READ_BACK:
        try:
            settled = settle_action(incident_id, reason)
        except UnknownIncident:  # Redis lost it between the takeover and the read-back
            log.warning("%s was gone from Redis when its interrupted action was read back "
                        "(lost with Redis's data; the data-loss watch says so): dropped",
                        incident_id)
            return Redrive(incident_id, RedriveOutcome.DROPPED, reason)
        return Redrive(incident_id,
                       RedriveOutcome.READ_BACK if settled else RedriveOutcome.LEFT, reason)
    if after.then is Then.GAVE_UP:
        return Redrive(incident_id, RedriveOutcome.GAVE_UP, after.reason)
    rediagnose(incident_id)
    return Redrive(incident_id, RedriveOutcome.REDIAGNOSED, reason)


def read_back_waiting(interrupted: CutShort,
                      settle_action: Callable[..., bool]) -> None:
    """This replica's actions whose host stopped answering: read back once it answers
    (``only_if_reachable``); one whose incident Redis lost meanwhile is forgotten."""
    for incident_id, why in interrupted.waiting_for_hosts():
        try:
            settled = settle_action(incident_id, why, only_if_reachable=True)
        except UnknownIncident:
            log.warning("%s was gone from Redis when its host was read back (a data loss: "
                        "the data-loss watch says so in the channel); forgotten", incident_id)
            settled = True
        if settled:
            interrupted.discard(incident_id)


LOOP = "reconciler"  # its name in ``Heartbeats``


def run_forever(incidents: IncidentStore, sweep: Callable[[], list[Redrive]],
                stop: threading.Event, every_s: float, *,
                local_pass: Callable[[], list[Redrive]] | None = None,
                heartbeats: Heartbeats | None = None) -> None:
    """Each period: this replica's own pass (``local_pass``: the data-loss watch, the steps
    a refusal interrupted here), then the sweep on whichever replica wins the claim."""
    token = step_owner()
    while not stop.wait(every_s):
        try:
            done = local_pass() if local_pass is not None else []
            if incidents.inflight.claim_sweep(token, every_s * 0.9):
                done += sweep()
            for redrive in done:
                log.info("re-drove %s: %s (%s)", redrive.incident_id,
                         redrive.outcome.value, redrive.reason)
            if heartbeats is not None:
                heartbeats.ok(LOOP)
        except Exception as exc:  # Redis blip: log, try next period
            why = refusal(exc)
            if why is not None:
                metrics.refused(why, LOOP)
                log.warning("incident reconciler: Redis refused (%s): %s", why, exc)
            else:
                log_internal(exc, "incident reconciler")
            if heartbeats is not None:
                heartbeats.failed(LOOP, why or type(exc).__name__)
