"""Pure: from what ran and what verification saw, the outcome and the one-line summary.

The summary is what a person reads first in the thread or terminal, so it says what
happened to the host, not what the bot intended: "stopped and disabled X; 8/8 GPUs free
(max 0 MiB) after 1.2 s", or the respawn, or the deadline and what the re-probe found.
"""

from __future__ import annotations

from bot.core import fmt, strings
from bot.domain.action_result import CommandRecord, Outcome, Seen, Verification
from bot.remediation.actions.base import Action
from bot.remediation.steps import hard_failure


def decide(records: list[CommandRecord], verification: Verification, *,
           noop: bool = False) -> Outcome:
    timed_out = any(r.timed_out for r in records)
    if any(hard_failure(r) for r in records):
        return Outcome.FAILED
    if verification.seen is Seen.COULD_NOT_CHECK:
        return Outcome.COULD_NOT_CHECK
    if verification.ok:
        if noop:
            return Outcome.NOOP
        return Outcome.TIMED_OUT_BUT_DONE if timed_out else Outcome.SUCCEEDED
    if verification.respawned:
        return Outcome.RESPAWNED
    if verification.evidence.get("held_by_others"):
        return Outcome.STILL_HELD
    return Outcome.TIMED_OUT if timed_out else Outcome.FAILED


def _secs(records: list[CommandRecord], verification: Verification) -> float:
    return sum(r.duration_s for r in records if r.ran) + verification.elapsed_s


def _first_line(text: str) -> str:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return lines[0][:200] if lines else "no output"


def rungs(spec: Action, subject: str, records: list[CommandRecord],
          grace_s: float | None) -> tuple[str, str]:
    """(title, subject) naming every rung climbed (``Action.rungs``: a terminate says
    SIGTERM, then SIGKILL after the grace when the kill ran)."""
    return spec.rungs(subject, records, grace_s)


def summarize(spec: Action, subject: str, host: str, outcome: Outcome,
              records: list[CommandRecord], verification: Verification,
              grace_s: float | None = None) -> str:
    detail = verification.detail
    title, subject = rungs(spec, subject, records, grace_s)
    done = strings.REM_SUCCEEDED.format(title=title, subject=subject, detail=detail,
                                        secs=_secs(records, verification)).replace(" ;", ";")
    late = next((r for r in records if r.timed_out), None)
    if outcome is Outcome.SUCCEEDED:
        return done
    if outcome is Outcome.COULD_NOT_CHECK:
        return strings.REM_COULD_NOT_CHECK.format(title=title, subject=subject, host=host,
                                                  why=verification.why).replace("  ", " ")
    if outcome is Outcome.NOOP:
        why = "; ".join(sorted({r.skipped for r in records if r.skipped}))
        return strings.REM_NOOP.format(subject=subject, why=why or "already done", detail=detail)
    if outcome is Outcome.TIMED_OUT_BUT_DONE and late is not None:
        return strings.REM_TIMED_OUT_BUT_DONE.format(command=late.command,
                                                     deadline=late.timeout_s or 0, rest=done)
    if outcome is Outcome.RESPAWNED:
        return strings.REM_RESPAWNED.format(title=title, subject=subject,
                                             detail=detail).replace(" ,", ",")
    if outcome is Outcome.STILL_HELD:
        return strings.REM_STILL_HELD.format(title=title, subject=subject,
                                             detail=detail).replace(" ,", ",")
    if outcome is Outcome.TIMED_OUT and late is not None:
        return strings.REM_TIMED_OUT.format(command=late.command, deadline=late.timeout_s or 0,
                                            detail=detail)
    failed = next((r for r in records if hard_failure(r)), None)
    if failed is not None:
        why = failed.error or _first_line(failed.stderr or failed.stdout)
        return strings.REM_FAILED_STEP.format(command=failed.command, status=failed.exit_status,
                                              why=why, detail=detail)
    if verification.evidence.get("partial"):
        return strings.REM_PARTIAL.format(title=spec.title, subject=subject, host=host,
                                          detail=detail)
    if title != spec.title:  # the rungs climbed, then what the host still shows
        return strings.REM_RUNGS_NO_EFFECT.format(rungs=title, detail=detail)
    ran = sum(1 for r in records if r.ran)
    return strings.REM_FAILED_VERIFY.format(commands=fmt.counted(ran, "command"), host=host,
                                            detail=detail)
