"""Run an action's commands: skip what already holds, enforce deadlines, re-probe.

A command that hits its deadline, or fails, is not taken at its word: the host is
asked again whether the step's effect holds (``systemctl stop`` that timed out may
still have stopped the unit, as in the story). The answer goes into the record.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from bot.domain.action_result import CommandRecord
from bot.domain.host_state import CapturedState, ProcState, UnitState
from bot.remediation.probe_runner import ProbeFailed, plain
from bot.remediation.readings import read_journal_bytes, read_process, read_unit
from bot.remediation.spec import RemoteStep
from bot.ssh.base import Command, SSHError
from playbooks.parsers.common import size_bytes

if TYPE_CHECKING:
    from bot.remediation.polling import ActionRun

_SYSTEMD = frozenset({"stop", "start", "disable", "enable", "mask", "unmask"})


def skip_reason(step: RemoteStep, unit: UnitState | None = None, proc: ProcState | None = None,
                journal: tuple[int | None, int] | None = None) -> str | None:
    """Why a step need not run: its effect already holds. ``None``: run it."""
    if step.name in _SYSTEMD and unit is not None:
        return _unit_skip(step.name, unit)
    if step.name in ("term", "kill") and proc is not None and not proc.alive:
        return "process already gone"
    if step.name == "vacuum" and journal is not None:
        size, limit = journal
        if size is not None and size <= limit:
            return "journal already within the limit"
    return None


def _unit_skip(verb: str, u: UnitState) -> str | None:
    if verb == "stop" and not u.running:
        return f"already {u.active_state or 'inactive'}"
    if verb == "start" and u.running:
        return f"already {u.active_state}"
    if verb == "disable" and not u.enabled:
        return f"unit file already {u.unit_file_state or 'disabled'}"
    if verb == "enable" and u.enabled:
        return "unit file already enabled"
    if verb == "mask" and u.masked:
        return "unit file already masked"
    if verb == "unmask" and not u.masked:
        return "unit file not masked"
    return None


def _journal_limit(ctx: ActionRun) -> int:
    return size_bytes(ctx.params.get("size", "")) or 0


def precheck(ctx: ActionRun, step: RemoteStep, captured: CapturedState) -> str | None:
    """Skip reason against the captured state: the action's own (``Action.precheck``)."""
    return ctx.spec.precheck(ctx, step, captured)


def generic_skip(ctx: ActionRun, step: RemoteStep, captured: CapturedState) -> str | None:
    """What most actions skip: a systemctl verb whose state holds, a signal to a process
    already gone, a vacuum of a journal already within the limit."""
    unit = captured.units[0] if captured.units else None
    proc = captured.processes[0] if captured.processes else None
    journal = (captured.journal_bytes, _journal_limit(ctx)) if step.name == "vacuum" else None
    return skip_reason(step, unit, proc, journal)


def wait_gone(ctx: ActionRun, pid: int) -> str | None:
    """Wait out the grace for ``pid`` to exit after SIGTERM: why SIGKILL need not run
    ("exited 1.2 s after SIGTERM"), or None once the grace has passed."""
    start = time.monotonic()
    while True:
        proc = read_process(ctx.runner, ctx.target, str(pid), ctx.options.probe_timeout_s)
        waited = time.monotonic() - start
        if not proc.alive:
            return f"exited {waited:.1f} s after SIGTERM"
        if waited >= ctx.options.term_grace_s:
            return None
        time.sleep(min(ctx.options.poll_interval_s, ctx.options.term_grace_s))


def observe(ctx: ActionRun, step: RemoteStep,
            captured: CapturedState) -> tuple[bool, dict[str, Any]]:
    """Does the step's effect hold right now, and what was seen."""
    t = ctx.options.probe_timeout_s
    if step.name in _SYSTEMD:
        unit = read_unit(ctx.runner, ctx.target, captured.units[0].name, t)
        seen = {"active_state": unit.active_state, "unit_file_state": unit.unit_file_state,
                "main_pid": unit.main_pid, "pids": list(unit.pids)}
        return _unit_skip(step.name, unit) is not None, seen
    if step.name in ("term", "kill"):
        proc = read_process(ctx.runner, ctx.target, str(captured.processes[0].pid), t)
        return not proc.alive, {"pid": proc.pid, "alive": proc.alive}
    if step.name != "vacuum":
        return False, {}  # no cheap observation: the command's own status stands
    size = read_journal_bytes(ctx.runner, ctx.target, t)
    before = captured.journal_bytes
    shrank = before is not None and size is not None and size < before
    done = size is not None and (size <= _journal_limit(ctx) or shrank)
    return done, {"journal_bytes": size}


def reprobe(ctx: ActionRun, step: RemoteStep, captured: CapturedState,
            patient: bool) -> dict[str, Any]:
    """Ask the host what actually happened; after a timeout, keep asking for ``reprobe_s``."""
    start = time.monotonic()
    while True:
        done, seen = observe(ctx, step, captured)
        elapsed = time.monotonic() - start
        if done or not patient or elapsed >= ctx.options.reprobe_s:
            return {"effect": done, "after_s": round(elapsed, 3), **seen}
        time.sleep(ctx.options.poll_interval_s)


class HostLost(SSHError):
    """The host stopped answering after a step was sent to it (issue 39): its re-probe
    could not read it. Carries the step's record, so what was sent is never lost."""

    kind = "unreachable"

    def __init__(self, why: str, record: CommandRecord) -> None:
        super().__init__(why)
        self.record = record


def run_one(ctx: ActionRun, step: RemoteStep, captured: CapturedState) -> CommandRecord:
    text = step.text(ctx.target.sudo)
    deadline = ctx.options.step_deadline(step.timeout_s)
    probe = ctx.runner.run(plain(ctx.target), Command(f"action.{step.name}", text, deadline))
    record = CommandRecord.from_probe(step.name, text, probe, deadline)
    if record.ok:
        return record
    try:
        seen = reprobe(ctx, step, captured, patient=probe.timed_out)
    except (ProbeFailed, SSHError) as exc:  # the host no longer answers: stop here
        raise HostLost(str(exc), record) from None
    return CommandRecord(**{**record.to_dict(), "reprobe": seen})


def hard_failure(record: CommandRecord) -> bool:
    """Failed, not by a deadline, and the host confirms the effect is missing."""
    if record.ok or record.timed_out:
        return False
    return not (record.reprobe and record.reprobe.get("effect"))


def run_steps(ctx: ActionRun, steps: tuple[RemoteStep, ...], captured: CapturedState,
              records: list[CommandRecord]) -> list[CommandRecord]:
    """Each step once, in order; stop at the first hard failure.

    Appends to ``records`` as it goes, so a connection lost mid-way keeps what ran.
    """
    failed = False
    for step in steps:
        if failed and not step.always:
            continue  # after a failure only the steps that restore what was stopped run
        reason = precheck(ctx, step, captured)
        if reason is not None:
            records.append(CommandRecord(step.name, step.text(ctx.target.sudo), skipped=reason))
            continue
        try:
            record = run_one(ctx, step, captured)
        except HostLost as lost:
            records.append(lost.record)
            raise
        records.append(record)
        failed = failed or hard_failure(record)
    return records


def all_skipped(ctx: ActionRun, steps: tuple[RemoteStep, ...], captured: CapturedState) -> bool:
    """Idempotence: nothing to run when every step's effect already holds."""
    chosen = [s for s in steps if ctx.spec.counts_for_noop(s)]
    return bool(chosen) and all(precheck(ctx, s, captured) is not None for s in chosen)
