"""The ``Action`` base class: one class per action kind owns everything about that kind.

Its metadata (kind, risk, revertable, frees_gpus, remote), its typed parameters (a
pydantic ``ActionParams`` whose fields carry the grammar a value must pass before it can
reach a command line), its preflight checks, what it captures, its remote steps and when
each may be skipped, the verification that proves it worked, its revert, the follow-ups
it offers and the words a person reads. Code outside the action's module asks the action
(``bot.remediation.actions.get(kind)``) and never compares its kind string.

The shared machinery (running steps, polling, reading the host) stays in
``bot/remediation``; each action calls what it needs of it. Subclasses set the class
attributes and override the hooks; the defaults are what most kinds do.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import BaseModel, BeforeValidator, ConfigDict, ValidationError
from pydantic_core import PydanticUndefined

from bot.core import strings
from bot.domain import validate
from bot.domain.action_result import ActionResult, CommandRecord, Verification
from bot.domain.findings import ProposedAction
from bot.domain.headline import Fixes
from bot.domain.host_state import CapturedState, UnitState
from bot.remediation import steps
from bot.remediation.spec import ActionRefused, ParamSpec, RemoteStep
from bot.ssh.base import SSHRunner, SSHTarget
from playbooks.base import action_id

if TYPE_CHECKING:
    from bot.remediation.polling import ActionRun


@dataclass(frozen=True)
class ParamHelp:
    """What a parameter is, for the refusal that names a missing one. A parameter is
    ``Annotated[str, BeforeValidator(check), ParamHelp("...")]``: its grammar (``bot.domain.
    validate`` style: the raw value in, the canonical string out, ``InvalidIdentifier``
    otherwise), then its help."""

    text: str


def choice(name: str, allowed: tuple[str, ...]) -> Callable[[object], str]:
    """A closed set of values (``unit_file_state``, ``override``)."""
    def check(value: object) -> str:
        if value not in allowed:
            raise validate.InvalidIdentifier(name, value, f"must be one of {', '.join(allowed)}")
        return str(value)
    return check


class ActionParams(BaseModel):
    """An action's parameters, validated: every field a canonical string that passed its
    grammar. Extra keys are refused; a default is used as given (it is ours)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    def as_dict(self) -> dict[str, str]:
        """The canonical ``{name: value}`` the commands, the audit and the record use."""
        return {k: str(v) for k, v in self.model_dump().items()}


class NoParams(ActionParams):
    """An action that takes no parameters (a reboot)."""


@dataclass(frozen=True)
class Refusal:
    """Why an action must not run (nothing ran), and what to do instead (plain proposals,
    each ``{kind, params, reason, risk}``, that the flow turns into buttons)."""

    reason: str
    proposals: tuple[dict[str, Any], ...] = ()


def some(*items: dict[str, Any] | None) -> tuple[dict[str, Any], ...]:
    """The proposals that passed their grammar (``Action.proposal`` gives None otherwise)."""
    return tuple(i for i in items if i is not None)


class Action:
    """One action kind. Registered by its ``kind`` (``bot/remediation/actions/registry.py``);
    the registry holds one instance per kind."""

    kind: ClassVar[str]
    title: ClassVar[str]  # past tense for summaries: "stopped and disabled"
    risk: ClassVar[str]
    Params: ClassVar[type[ActionParams]] = NoParams
    frees_gpus: ClassVar[bool] = False
    revertable: ClassVar[bool] = False
    remote: ClassVar[bool] = True  # False: acts on the bot's own queue, not over SSH
    revert_kind: ClassVar[str | None] = None  # the kind that puts back what this changed
    # --- what the flow and the message need to know, as facts of the action
    reprobe_first: ClassVar[bool] = True  # diagnose again before acting (is it still needed?)
    undoes: ClassVar[bool] = False  # it undoes an earlier fix: "Reverted", a confirm dialog
    resumes: ClassVar[bool] = False  # it resumes an extraction: the health gate runs first
    repair: ClassVar[bool] = False  # a verified one returns a node this incident drained
    reboots: ClassVar[bool] = False  # proven later, by the host coming back (boot id)
    drains: ClassVar[bool] = False  # takes a Slurm node out: watched until DRAINED
    returns_node: ClassVar[bool] = False  # gives a node back to Slurm: behind the gate
    overrides_gate: ClassVar[bool] = False  # runs although the health gate failed
    hands_to_rma: ClassVar[bool] = False  # a verified one keeps the node's RMA evidence bundle
    fixes: ClassVar[Fixes | None] = None  # which finding it can be shown to fix
    quiet_now: ClassVar[bool] = False  # its verification is about a file, not the alert
    words_from_summary: ClassVar[bool] = False  # its words depend on what ran (the rungs)
    previewed: ClassVar[bool] = False  # its proposal lists items kept in the diagnosis
    captures_gpus: ClassVar[bool | None] = None  # None: when it frees GPUs
    # capture reads the subject its parameters name (a ``unit``, a ``pid``, a Slurm
    # ``node``); False for an action whose parameters mean something else (an extension's)
    reads_subject: ClassVar[bool] = True
    phrase_template: ClassVar[str | None] = None  # the proposal, as a verb phrase
    done_template: ClassVar[str | None] = None  # what it did, once verified

    # --- parameters ---------------------------------------------------------------------
    @property
    def params(self) -> tuple[ParamSpec, ...]:
        """Each parameter's name, grammar, help and default (from ``Params``)."""
        out = []
        for name, info in self.Params.model_fields.items():
            check = next(m.func for m in info.metadata if isinstance(m, BeforeValidator))
            text = next((m.text for m in info.metadata if isinstance(m, ParamHelp)), name)
            default = None if info.default is PydanticUndefined else str(info.default)
            out.append(ParamSpec(name, check, text, default))  # type: ignore[arg-type]
        return tuple(out)

    def parse(self, params: Mapping[str, object]) -> ActionParams:
        """The typed parameters, or ``ActionRefused`` naming the first bad one."""
        specs = self.params
        names = {p.name for p in specs}
        extra = sorted(set(params) - names)
        if extra:
            raise ActionRefused(f"refused {self.kind}: unknown parameter {extra[0]!r} "
                                f"(takes {', '.join(sorted(names))})")
        for spec in specs:
            if spec.name not in params and spec.default is None:
                raise ActionRefused(
                    f"refused {self.kind}: missing parameter {spec.name!r} ({spec.help})")
        try:
            return self.Params.model_validate(dict(params))
        except ValidationError as exc:
            raise ActionRefused(f"refused {self.kind}: {_first_reason(exc)}") from None

    def validate(self, params: Mapping[str, object]) -> dict[str, str]:
        """Canonical parameters, or ``ActionRefused`` naming the first bad one."""
        return self.parse(params).as_dict()

    # --- commands -------------------------------------------------------------------------
    def render(self, p: Mapping[str, str]) -> tuple[RemoteStep, ...]:
        """The remote steps, in order, from canonical parameters (nothing runs here)."""
        return ()

    def plan(self, p: Mapping[str, str], target: SSHTarget | None) -> list[str]:
        """The exact commands it may run on ``target`` (what chat and the CLI show)."""
        sudo = bool(target and target.sudo)
        return [s.text(sudo) for s in self.render(p)]

    def preview(self, p: Mapping[str, str]) -> str:
        """What the CLI prints before asking (a drop-in's diff); "" for most."""
        return ""

    def counts_for_noop(self, step: RemoteStep) -> bool:
        """Whether ``step`` counts when asking "does every effect already hold"."""
        return True

    def precheck(self, ctx: ActionRun, step: RemoteStep, captured: CapturedState) -> str | None:
        """Why ``step`` need not run (its effect already holds), or None: run it."""
        return steps.generic_skip(ctx, step, captured)

    # --- before, during, after --------------------------------------------------------------
    def wants_gpus(self) -> bool:
        """Capture the GPUs and their holders before acting."""
        return self.frees_gpus if self.captures_gpus is None else self.captures_gpus

    def capture_holders(self, runner: SSHRunner, target: SSHTarget, p: Mapping[str, str],
                        timeout_s: float) -> tuple[UnitState, ...]:
        """What it stops and starts again around itself, read as owners at capture (the
        units and containers a GPU reset releases); most: nothing."""
        return ()

    def read_back_gpus(self) -> bool:
        """After an interruption, its read-back also wants every GPU free."""
        return self.frees_gpus

    def restarting_owner(self, ctx: ActionRun, captured: CapturedState) -> UnitState | None:
        """The unit that would undo it by starting the process again (a signal's)."""
        return None

    def capture_journal(self) -> bool:
        return False

    def capture_disks(self) -> bool:
        return False

    def preflight(self, ctx: ActionRun, captured: CapturedState) -> Refusal | None:
        """This kind's own reasons not to run (the sudo check is the caller's, for all)."""
        if captured.units:
            unit = captured.units[0]
            if not unit.exists:
                return Refusal(strings.REM_UNIT_MISSING.format(unit=unit.name,
                                                               host=ctx.target.name))
        return None

    def verify(self, ctx: ActionRun, captured: CapturedState, patient: bool = True
               ) -> Verification:
        """What proves it worked, past its restart window."""
        raise NotImplementedError(self.kind)

    def revert_params(self, captured: CapturedState | None) -> dict[str, str] | None:
        """The parameters of ``revert_kind`` that put back what ``captured`` shows."""
        return None

    def rolls_back(self) -> bool:
        """A part-failed run is undone with ``revert_kind`` (a unit's own steps)."""
        return self.revert_kind is not None and self.revertable

    # --- what follows ------------------------------------------------------------------------
    def next_rung(self, result: ActionResult) -> dict[str, Any] | None:
        """The ladder's next step after a verified failure of this one (a proposal)."""
        return None

    def lasting(self, result: ActionResult) -> list[ProposedAction]:
        """The lasting fix to offer after a verified success."""
        return []

    def offers_revert(self) -> bool:
        """Its revert is offered as a Revert button (a drained node returns only through
        the health gate instead)."""
        return True

    # --- words ---------------------------------------------------------------------------------
    def subject(self, p: Mapping[str, str], host: str) -> str:
        """What it acted on, as the result line names it."""
        return p.get("unit") or "the journal"

    def rungs(self, subject: str, records: Sequence[CommandRecord],
              grace_s: float | None) -> tuple[str, str]:
        """(title, subject) naming the rungs climbed (SIGTERM then SIGKILL); most: as is."""
        return self.title, subject

    def phrase(self, p: Mapping[str, str]) -> str:
        """The proposal as a plain verb phrase (``p`` already escaped for chat); "" when
        this kind has no words of its own (the caller says it generically)."""
        return self.phrase_template.format(**p) if self.phrase_template else ""

    def done(self, p: Mapping[str, str]) -> str:
        """What it did, once verified ("" when it has no words of its own)."""
        return self.done_template.format(**p) if self.done_template else ""

    def clears_xids(self, p: Mapping[str, str]) -> str:
        """The repair, in words, that clears an incident's Xid tallies once it verified
        ("the reset of GPU 3"); "" for an action that clears none."""
        return ""

    def risk_as_revert(self, risk: str) -> str:
        """The risk a Revert button of this kind shows (``risk``: the offer's own)."""
        return risk

    def offer_label(self, reason: str) -> str:
        """How the CLI labels this action when it offers it after a result."""
        if self.undoes:
            return strings.REM_OFFER_REVERT
        return reason

    # --- proposing it ------------------------------------------------------------------------
    @classmethod
    def proposal(cls, params: Mapping[str, object], reason: str) -> dict[str, Any] | None:
        """This action as a plain proposal (a refusal's alternative, the ladder's next
        rung); None when its parameters fail the grammar (a hostile name is never
        proposed)."""
        try:
            clean = cls().validate(params)
        except ActionRefused:
            return None
        return {"kind": cls.kind, "params": clean, "reason": reason, "risk": cls.risk}

    @classmethod
    def propose(cls, host: str, params: Mapping[str, str], reason: str,
                risk: str | None = None, *, id: str | None = None) -> ProposedAction:
        """A ``ProposedAction`` of this kind for ``host``, with its stable id."""
        clean = dict(params)
        return ProposedAction(id or action_id(host, cls.kind, clean), cls.kind, clean, reason,
                              cls.risk if risk is None else risk)

    @classmethod
    def owns(cls, kind: str) -> bool:
        """Is ``kind`` this action (for code that holds a kind and asks about one class)."""
        return kind == cls.kind


def as_proposed(host: str, p: Mapping[str, Any]) -> ProposedAction:
    """A plain proposal (``Action.proposal``) as a ``ProposedAction`` with its id."""
    params = dict(p["params"])
    return ProposedAction(id=action_id(host, p["kind"], params), kind=p["kind"], params=params,
                          reason=p["reason"], risk=p["risk"])


def _first_reason(exc: ValidationError) -> str:
    """The grammar's own words (``InvalidIdentifier``) for the first bad field."""
    for err in exc.errors():
        cause = (err.get("ctx") or {}).get("error")
        if isinstance(cause, validate.InvalidIdentifier):
            return str(cause)
    first = exc.errors()[0]
    where = ".".join(str(p) for p in first.get("loc", ()))
    return f"invalid {where}: {first.get('msg', 'invalid')}"
