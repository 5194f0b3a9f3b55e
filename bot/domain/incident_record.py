"""The flow's typed parts of an incident: what it found, offered, ran, and where it is posted.

Each part is one field of ``Incident`` and one field of its Redis hash (JSON for the
structured ones), written by ``IncidentStore.update`` with a function over the record, never
as free-form keys. Every part round-trips through plain JSON (``to_json``/``from_json``) so
any replica can re-render or re-drive the incident after a restart. Readers are lenient
the way rq's ``Job.restore`` is: a missing key takes its default, an unknown key is
ignored, so a record written by an older bot still reads.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from bot.domain.action_result import ActionResult
from bot.domain.findings import ProposedAction


def _action_from_json(a: dict[str, Any]) -> ProposedAction:
    return ProposedAction(str(a["id"]), str(a["kind"]), dict(a["params"]),
                          str(a.get("reason", "")), str(a.get("risk", "")))


@dataclass(frozen=True)
class ActionPlan:
    """A proposed action, the exact commands it will run, and its approval's id."""

    action: ProposedAction
    commands: tuple[str, ...]
    approval_id: str
    destructive: bool = True  # destructive actions get a confirm dialog
    # a follow-up: the approval of the step whose result offered it (a revert of that step
    # withdraws it); "" for what the diagnosis proposed
    follows: str = ""
    undone: bool = False  # a revert put back what this (approved) step changed

    def to_json(self) -> dict[str, Any]:
        extra = {"follows": self.follows} if self.follows else {}
        return {"action": self.action.to_dict(), "commands": list(self.commands),
                "approval_id": self.approval_id, **extra,
                **({"undone": True} if self.undone else {})}

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> ActionPlan:
        return cls(_action_from_json(raw["action"]), tuple(raw["commands"]),
                   str(raw["approval_id"]), follows=str(raw.get("follows") or ""),
                   undone=bool(raw.get("undone", False)))


@dataclass(frozen=True)
class StepResult:
    """One line of the incident's results: what a step did, and whether it held."""

    ok: bool
    text: str  # "GPUs free: 8 × 0 MiB held", "unit disabled", ...
    # an action's line also keeps what it was and what its verification saw, when: the
    # settled message says "8/8 GPUs free since 11:02" after a later drop-in (issue 29)
    kind: str = ""
    now: str = ""
    at: float = 0.0
    held: int | None = None  # GPUs its verification saw still holding memory (None: not read)

    @classmethod
    def of(cls, result: ActionResult) -> StepResult:
        v = result.verification
        seen = v.detail if v is not None else ""
        return cls(result.ok, result.summary, result.kind, seen,
                   result.started_at + result.duration_s if result.started_at else 0.0,
                   held_gpus(v.evidence) if v is not None else None)

    def to_json(self) -> dict[str, Any]:
        extra = {"kind": self.kind, "now": self.now, "at": self.at} if self.kind else {}
        if self.held is not None:
            extra["held"] = self.held
        return {"ok": self.ok, "text": self.text, **extra}

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> StepResult:
        held = raw.get("held")
        return cls(bool(raw["ok"]), str(raw["text"]), str(raw.get("kind") or ""),
                   str(raw.get("now") or ""), float(raw.get("at") or 0.0),
                   int(held) if isinstance(held, int) else None)


def held_gpus(evidence: dict[str, Any]) -> int | None:
    """How many GPUs a verification saw holding memory: the GPUs a revert left in use
    (``held_after``), or those a stop or kill still saw held (``held``); None when it did
    not look at the GPUs."""
    after = evidence.get("held_after")
    if isinstance(after, int):
        return after
    held = evidence.get("held")
    return len(held) if isinstance(held, list) and evidence.get("gpus") else None


@dataclass(frozen=True)
class LastOutcome:
    """The most recent action's outcome: its full result, or only a sentence when the
    step failed before (or instead of) running an action."""

    summary: str
    result: ActionResult | None = None
    # nothing ran because the host could not be read (the re-probe at the click, the
    # read-back after an interruption): what failed. Could not check, never "gone".
    could_not_check: str = ""

    @classmethod
    def of(cls, result: ActionResult) -> LastOutcome:
        return cls(result.summary, result)

    def to_json(self) -> dict[str, Any]:
        if self.result is not None:
            return self.result.to_dict()
        extra = {"could_not_check": self.could_not_check} if self.could_not_check else {}
        return {"summary": self.summary, **extra}

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> LastOutcome:
        if "kind" in raw and "outcome" in raw:
            result = ActionResult.from_dict(raw)
            return cls(result.summary, result)
        return cls(str(raw.get("summary") or ""),
                   could_not_check=str(raw.get("could_not_check") or ""))


@dataclass(frozen=True)
class ChatRefs:
    """Where the incident's message is: its own ``ts``, and the thread its replies go to
    (its own, or its group parent's for a grouped host)."""

    channel: str
    ts: str
    thread_ts: str
    permalink: str = ""  # the message's web link, when the backend knows it

    def to_json(self) -> dict[str, Any]:
        return {"channel": self.channel, "ts": self.ts, "thread_ts": self.thread_ts,
                "permalink": self.permalink}

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> ChatRefs:
        return cls(str(raw["channel"]), str(raw["ts"]),
                   str(raw.get("thread_ts") or raw["ts"]), str(raw.get("permalink") or ""))


@dataclass(frozen=True)
class LostCard:
    """A re-opened incident's lead to the card of the incident it replaces (issue 39): Redis
    lost the old incident while its card's post was in flight (Slack acted on it, the answer
    never came back), so no ``ChatRefs`` survived. Its first card post looks in the channel
    for a top-level message the old incident's outbox posted (tagged with its outbox key)
    and edits that one instead of posting a second. ``since``: the old incident's first
    alert, before which its card cannot have been posted."""

    incident_id: str
    since: float

    def to_json(self) -> dict[str, Any]:
        return {"incident_id": self.incident_id, "since": self.since}

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> LostCard:
        return cls(str(raw["incident_id"]), float(raw.get("since") or 0.0))


@dataclass(frozen=True)
class Running:
    """The action an approval started and that has not finished yet."""

    kind: str
    by: str
    at: float
    approval_id: str = ""
    said: str = ""  # the action in the words a person reads (chat-escaped)

    def to_json(self) -> dict[str, Any]:
        extra = {"said": self.said} if self.said else {}
        return {"kind": self.kind, "by": self.by, "at": self.at, "approval_id": self.approval_id,
                **extra}

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> Running:
        return cls(str(raw.get("kind", "")), str(raw.get("by", "")), float(raw.get("at", 0.0)),
                   str(raw.get("approval_id", "")), str(raw.get("said") or ""))


@dataclass(frozen=True)
class Snooze:
    """Who snoozed the incident, until when, and the state it goes back to."""

    by: str
    until: float
    from_state: str

    def to_json(self) -> dict[str, Any]:
        return {"by": self.by, "until": self.until, "from": self.from_state}

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> Snooze:
        return cls(str(raw.get("by", "")), float(raw.get("until", 0.0)),
                   str(raw.get("from") or "awaiting_approval"))


@dataclass(frozen=True)
class RebootPending:
    """A ``host.reboot`` that was sent: the boot id before it, and until when to wait."""

    boot_id: str | None
    requested_at: float
    deadline: float
    by: str
    done: bool = False
    boot_id_after: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"boot_id": self.boot_id, "requested_at": self.requested_at,
                "deadline": self.deadline, "by": self.by, "done": self.done,
                "boot_id_after": self.boot_id_after}

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> RebootPending:
        return cls(raw.get("boot_id"), float(raw.get("requested_at", 0.0)),
                   float(raw.get("deadline", 0.0)), str(raw.get("by", "")),
                   bool(raw.get("done", False)), raw.get("boot_id_after"))


@dataclass(frozen=True)
class HostRebootMark:
    """Another incident of this host rebooted it: re-diagnose this one when it is back."""

    by: str  # the incident whose approved reboot it was
    who: str
    at: float
    settled: bool = False
    boot_id_after: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"by": self.by, "who": self.who, "at": self.at, "settled": self.settled,
                "boot_id_after": self.boot_id_after}

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> HostRebootMark:
        return cls(str(raw.get("by", "")), str(raw.get("who", "")), float(raw.get("at", 0.0)),
                   bool(raw.get("settled", False)), raw.get("boot_id_after"))


@dataclass(frozen=True)
class GateRecord:
    """What the GPU health gate said before a return to service (a resume, a Slurm node,
    a repair closed as fixed): each level with its status, duration and evidence."""

    job: str
    host: str
    passed: bool
    reasons: tuple[str, ...] = ()
    checks: dict[str, bool] = field(default_factory=dict)
    reached: int = 0  # the last level that passed (1 readings, 2 dcgm, 3 smoke)
    levels: tuple[dict[str, Any], ...] = ()  # playbooks.health_gate.LevelResult.to_json()

    def to_json(self) -> dict[str, Any]:
        return {"job": self.job, "host": self.host, "passed": self.passed,
                "reasons": list(self.reasons), "checks": dict(self.checks),
                "reached": self.reached, "levels": [dict(x) for x in self.levels]}

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> GateRecord:
        return cls(str(raw.get("job", "")), str(raw.get("host", "")),
                   bool(raw.get("passed", False)), tuple(raw.get("reasons") or ()),
                   {str(k): bool(v) for k, v in (raw.get("checks") or {}).items()},
                   int(raw.get("reached") or 0),
                   tuple(x for x in raw.get("levels") or () if isinstance(x, dict)))


@dataclass(frozen=True)
class ProgressTracker:
    """The resumed job's one progress message in the thread and its moving-average window."""

    samples: tuple[tuple[float, int], ...] = ()
    started_at: float | None = None
    started_done: int | None = None
    channel: str = ""
    ts: str = ""
    shown: str = ""
    shown_at: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return {"samples": [[t, d] for t, d in self.samples], "started_at": self.started_at,
                "started_done": self.started_done, "channel": self.channel, "ts": self.ts,
                "shown": self.shown, "shown_at": self.shown_at}

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> ProgressTracker:
        samples = tuple((float(p[0]), int(p[1])) for p in raw.get("samples") or ()
                        if isinstance(p, list | tuple) and len(p) == 2)
        started_at = raw.get("started_at")
        started_done = raw.get("started_done")
        return cls(samples, float(started_at) if started_at is not None else None,
                   int(started_done) if started_done is not None else None,
                   str(raw.get("channel", "")), str(raw.get("ts", "")),
                   str(raw.get("shown", "")), float(raw.get("shown_at") or 0.0))


@dataclass(frozen=True)
class ProbeOutput:
    """One probe's raw output, clipped, kept beside the diagnosis (whose JSON contract
    leaves outputs out) so the raw evidence can be shown on demand later."""

    name: str
    stdout: str = ""
    stderr: str = ""
    error: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "stdout": self.stdout, "stderr": self.stderr,
                "error": self.error}

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> ProbeOutput:
        return cls(str(raw.get("name", "")), str(raw.get("stdout") or ""),
                   str(raw.get("stderr") or ""), str(raw.get("error") or ""))
