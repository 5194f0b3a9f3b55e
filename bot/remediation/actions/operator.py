"""Operators' own actions (``ext.*``), built from an extension file's ``actions:``.

Each becomes an ``Action`` subclass (``action_classes``) registered by its kind beside the
built-in ones, so everything the flow does for an action applies unchanged: the plan
shows its exact commands, the approvers and fleet policies decide on it, the sudo
preflight asks ``sudo -n -l`` for each command, every run is audited, and the outcome is
what its verification observed.

- Parameters: each value must match its pattern in full (and be no option, no control
  character, at most 256 characters) or the action is refused before anything is made;
  each command is a template split into words once, and every word (a value included) is
  quoted when it is sent (``RemoteStep.text``).
- Verify: its command is run (without sudo, as every read) until its stdout matches, seen
  twice ``settle_s`` apart, within ``within_s``. A command that cannot run (timed out, no
  answer, no such program) means "could not check" (``ProbeFailed``), never fixed.
- Revert (when the file gives one): a second kind, ``<kind>.revert``, with the same
  parameters; verified when the action's verify command no longer matches.
"""

from __future__ import annotations

import shlex
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Annotated, Any, ClassVar

from pydantic import BeforeValidator, create_model

from bot.core import strings
from bot.domain.action_result import Seen, Verification
from bot.domain.extension import REVERT_SUFFIX, ActionDef, Template, fill, stdout_matches
from bot.domain.findings import ProbeResult
from bot.domain.host_state import CapturedState
from bot.remediation.actions.base import Action, ActionParams, ParamHelp, Refusal
from bot.remediation.probe_runner import ProbeFailed, plain
from bot.remediation.spec import RemoteStep
from bot.ssh.base import Command

if TYPE_CHECKING:
    from bot.remediation.polling import ActionRun

NOT_FOUND = (126, 127)  # the shell could not run the program


class OperatorAction(Action):
    """An ``ext.*`` action: its definition (``bot.domain.extension.ActionDef``) is the
    whole of what it knows."""

    definition: ClassVar[ActionDef]
    title = strings.EXT_TITLE
    risk = strings.EXT_RISK
    reads_subject = False  # its parameters are the operator's, not a unit or a pid
    goal_matches: ClassVar[bool] = True  # verified when the verify command matches

    # --- commands -----------------------------------------------------------------------
    def commands(self) -> tuple[Template, ...]:
        return self.definition.run

    def render(self, p: Mapping[str, str]) -> tuple[RemoteStep, ...]:
        timeout = self.definition.timeout_s
        return tuple(RemoteStep(f"run{i + 1}", fill(words, p), timeout)
                     for i, words in enumerate(self.commands()))

    def precheck(self, ctx: ActionRun, step: RemoteStep, captured: CapturedState) -> str | None:
        return None  # nothing is known to hold already: every command runs

    def preflight(self, ctx: ActionRun, captured: CapturedState) -> Refusal | None:
        return None  # the patterns refused a bad value already; sudo -n -l is the caller's

    def revert_params(self, captured: CapturedState | None) -> dict[str, str] | None:
        """The revert takes the same parameters the action ran with."""
        if self.revert_kind is None or captured is None:
            return None
        return dict(captured.params)

    # --- verification ----------------------------------------------------------------------
    def verify(self, ctx: ActionRun, captured: CapturedState, patient: bool = True
               ) -> Verification:
        v = self.definition.verify
        argv = fill(v.command, ctx.params)
        text = shlex.join(argv)
        start = time.monotonic()
        deadline = start + (v.within_s if patient else 0.0)
        settle = ctx.options.settle_s if patient else 0.0
        first: float | None = None
        while True:
            result = ctx.runner.run(plain(ctx.target), Command(
                "ext.verify", text, min(ctx.options.probe_timeout_s, max(v.within_s, 1.0))))
            now = time.monotonic()
            why = _cannot_run(result)
            seen = result.stdout.strip()[:200]
            if not why and stdout_matches(v.stdout_matches, result.stdout) == self.goal_matches:
                first = now if first is None else first
                if now - first >= settle:
                    return self._seen(True, text, seen, now - start)
            else:
                first = None
            if now >= deadline + settle:
                if why:
                    raise ProbeFailed(result, strings.EXT_CANNOT_RUN.format(command=text, why=why))
                return self._seen(False, text, seen, now - start)
            time.sleep(min(ctx.options.poll_interval_s, max(settle, 0.05)))

    def _seen(self, ok: bool, command: str, seen: str, secs: float) -> Verification:
        said = {(True, True): strings.EXT_VERIFIED, (False, True): strings.EXT_NOT_SEEN,
                (True, False): strings.EXT_REVERT_VERIFIED,
                (False, False): strings.EXT_REVERT_NOT_SEEN}[(ok, self.goal_matches)]
        pattern = self.definition.verify.stdout_matches
        detail = said.format(command=command, seen=seen, pattern=pattern, secs=secs)
        return Verification(Seen.of(ok), detail, secs,
                            evidence={"command": command, "stdout": seen, "pattern": pattern})

    # --- words -----------------------------------------------------------------------------
    def subject(self, p: Mapping[str, str], host: str) -> str:
        return strings.EXT_SUBJECT.format(kind=self.kind, says=self.definition.said(p))

    def phrase(self, p: Mapping[str, str]) -> str:
        return self.definition.said(p)

    def done(self, p: Mapping[str, str]) -> str:
        return strings.EXT_DONE.format(says=self.definition.said(p))


class OperatorRevert(OperatorAction):
    """The revert of an ``ext.*`` action: its ``revert`` commands, verified when the
    action's verify command no longer matches."""

    title = strings.EXT_REVERT_TITLE
    goal_matches = False
    reprobe_first = False  # offered after the fact: there is nothing to re-diagnose
    undoes = True

    def commands(self) -> tuple[Template, ...]:
        return self.definition.revert or ()

    def phrase(self, p: Mapping[str, str]) -> str:
        return strings.EXT_REVERT_SAYS.format(says=self.definition.said(p))


def _cannot_run(result: ProbeResult) -> str:
    """Why the command did not run ("" when it ran, whatever its exit status)."""
    if result.timed_out:
        return "timed out"
    if result.error:
        return result.error[:200]
    if result.exit_status in NOT_FOUND:
        return (result.stderr.strip() or f"exit {result.exit_status}")[:200]
    return ""


def params_model(d: ActionDef) -> type[ActionParams]:
    """The typed parameters: one field per parameter, its pattern as the grammar."""
    fields: dict[str, Any] = {
        p.name: (Annotated[str, BeforeValidator(p.check),
                           ParamHelp(p.help or f"a value matching {p.pattern}")], ...)
        for p in d.params}
    model: type[ActionParams] = create_model(
        _class_name(d.kind, "Params"), __base__=ActionParams, **fields)
    return model


def action_classes(d: ActionDef) -> list[type[OperatorAction]]:
    """The action (and its revert, when the file gives one) as classes to register."""
    params = params_model(d)
    revert_kind = d.kind + REVERT_SUFFIX if d.revert is not None else None
    body = {"kind": d.kind, "definition": d, "Params": params, "risk": d.risk,
            "revertable": revert_kind is not None, "revert_kind": revert_kind,
            "__module__": __name__, "__doc__": f"{d.kind}, from {d.source}"}
    out: list[type[OperatorAction]] = [type(_class_name(d.kind, ""), (OperatorAction,), body)]
    if revert_kind is not None:
        out.append(type(_class_name(revert_kind, ""), (OperatorRevert,), {
            **body, "kind": revert_kind, "revertable": False, "revert_kind": None,
            "__doc__": f"{revert_kind}, from {d.source}"}))
    return out


def _class_name(kind: str, suffix: str) -> str:
    return "".join(p.capitalize() for p in kind.replace(".", "_").split("_")) + suffix
