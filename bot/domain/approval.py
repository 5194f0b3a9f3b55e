"""Approval policy and the approval record: pure data and pure decisions.

Who may approve is decided here with no I/O (built from settings in
``bot/config/policy.py``); the store (``storage/approvals.py``) applies the decision
atomically in Redis, and the chat side resolves a user's Slack usergroups before asking.
Fail closed: no configured approvers means nobody may approve (``*``: anyone).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from bot.domain.findings import ProposedAction

ANYONE = "*"


class ApprovalStatus(StrEnum):
    PENDING = "pending"
    APPROVED = "approved"
    DENIED = "denied"
    EXPIRED = "expired"
    CANCELLED = "cancelled"  # withdrawn: a mutually exclusive alternative was approved


class ClaimOutcome(StrEnum):
    """What one click did. Only CLAIMED (approve) and DENIED-by-this-call act."""

    CLAIMED = "claimed"  # this click completed the approval: run the action now
    NEED_SECOND_APPROVER = "need_second_approver"  # recorded; two-person rule waits
    ALREADY_DONE = "already_done"  # approved (or denied, for a deny) before this click
    DENIED = "denied"  # the approval is denied (by this deny, or earlier for an approve)
    EXPIRED = "expired"
    UNAUTHORISED = "unauthorised"
    NOT_FOUND = "not_found"
    CANCELLED = "cancelled"  # withdrawn before this click (an alternative was approved)


class Resolver(StrEnum):
    """Who resolved the incident an approval was withdrawn with (issue 25): a late click
    is told "resolved at 11:02 UTC by the alert" (or by a person, or by the bot)."""

    ALERT = "alert"  # its alert cleared (ingest)
    PERSON = "person"  # Resolve button or ``/ir resolve``; ``decided_by`` is the user
    BOT = "bot"  # the flow (a fix verified, a diagnosis that found nothing)


WITHDRAWN_RESOLVED = "incident resolved"  # the reason on approvals withdrawn by a resolve


@dataclass(frozen=True)
class ApprovalAction:
    """The action an approval is for: its kind and parameters (validated by the action
    when the plan rendered its commands, and again before it runs), why and at what risk,
    the exact commands the approver saw, and the fleet policy's say on it. Stored as one
    JSON object with the keys it always had (old records load; the store's scripts read
    ``kind`` from it)."""

    kind: str
    params: dict[str, str] = field(default_factory=dict)
    id: str = ""
    reason: str = ""
    risk: str = ""
    commands: tuple[str, ...] = ()
    offered: bool = False  # a follow-up (Revert, Resume): not re-diagnosed before it runs
    policy: str = ""  # the fleet policy that matched, if any
    policy_mode: str = ""  # auto | shadow | approve
    policy_note: str = ""  # what the thread says about the policy's decision
    host: str = ""

    @classmethod
    def of(cls, action: ProposedAction, commands: Iterable[str], *, offered: bool = False,
           policy: Mapping[str, str] | None = None) -> ApprovalAction:
        """A proposed action with the commands it renders and the policy's fields
        (``policy``, ``policy_mode``, ``policy_note``, ``host``; none without a policy)."""
        extra = dict(policy or {})
        return cls(action.kind, dict(action.params), action.id, action.reason, action.risk,
                   tuple(commands), offered, extra.get("policy", ""),
                   extra.get("policy_mode", ""), extra.get("policy_note", ""),
                   extra.get("host", ""))

    def proposed(self) -> ProposedAction:
        return ProposedAction(self.id, self.kind, dict(self.params), self.reason, self.risk)

    def to_json(self) -> dict[str, Any]:
        """The stored form: every field, the optional ones only when set (as before)."""
        out: dict[str, Any] = {"id": self.id, "kind": self.kind, "params": dict(self.params),
                               "reason": self.reason, "risk": self.risk,
                               "commands": list(self.commands)}
        if self.offered:
            out["offered"] = True
        for key in ("policy", "policy_mode", "policy_note", "host"):
            if getattr(self, key):
                out[key] = getattr(self, key)
        return out

    @classmethod
    def from_json(cls, raw: Mapping[str, Any]) -> ApprovalAction:
        """A stored action, tolerant of records written before a field existed (and of
        keys this bot does not know, which are dropped)."""
        params = raw.get("params")
        return cls(kind=str(raw.get("kind", "")),
                   params={str(k): str(v) for k, v in params.items()}
                   if isinstance(params, Mapping) else {},
                   id=str(raw.get("id", "")), reason=str(raw.get("reason", "")),
                   risk=str(raw.get("risk", "")),
                   commands=tuple(str(c) for c in raw.get("commands") or ()),
                   offered=bool(raw.get("offered")), policy=str(raw.get("policy") or ""),
                   policy_mode=str(raw.get("policy_mode") or ""),
                   policy_note=str(raw.get("policy_note") or ""),
                   host=str(raw.get("host") or ""))


@dataclass(frozen=True)
class Approval:
    """One pending decision on one proposed action; its id is the button's value."""

    id: str
    incident_id: str
    action: ApprovalAction
    evidence_hash: str  # sha256 of the rendered findings the approver saw
    requested_by: str  # user id, or "alertmanager"/"agent" for alerts
    created_at: float
    expires_at: float
    status: ApprovalStatus = ApprovalStatus.PENDING
    required: int = 1  # approvers needed (2 under the two-person rule)
    approvers: tuple[str, ...] = ()
    decided_by: str = ""
    decided_at: float = 0.0
    reason: str = ""  # deny reason
    channel: str = ""  # where the message with the button lives, once posted
    message_ts: str = ""
    resolved_by: Resolver | None = None  # withdrawn because its incident resolved (by whom)

    @property
    def kind(self) -> str:
        return self.action.kind

    @property
    def is_open(self) -> bool:
        return self.status is ApprovalStatus.PENDING


@dataclass(frozen=True)
class ApprovalPolicy:
    """Who may approve what. Entries are Slack user ids (U…/W…) or usergroup ids (S…)."""

    approvers: frozenset[str] = frozenset()
    per_kind: Mapping[str, frozenset[str]] = field(default_factory=dict)
    allow_self_approval: bool = True
    two_person: frozenset[str] = frozenset()  # action kinds needing two distinct approvers
    expiry_s: float = 1800.0

    def approvers_for(self, kind: str) -> frozenset[str]:
        """A per-kind list replaces the global one (narrower rights for riskier actions)."""
        return self.per_kind.get(kind, self.approvers)

    def required_for(self, kind: str) -> int:
        return 2 if kind in self.two_person else 1

    def all_groups(self) -> frozenset[str]:
        """Every usergroup id mentioned anywhere, so callers resolve membership once."""
        entries = set(self.approvers).union(*self.per_kind.values())
        return frozenset(e for e in entries if is_usergroup(e))


def is_usergroup(entry: str) -> bool:
    return entry.startswith("S") and entry[1:].isalnum()


def may_decide(
    policy: ApprovalPolicy, kind: str, user: str, user_groups: Iterable[str], requested_by: str
) -> bool:
    """True when ``user`` may approve or deny an action of ``kind`` (pure, no I/O)."""
    if not user:
        return False
    if user == requested_by and not policy.allow_self_approval:
        return False
    allowed = policy.approvers_for(kind)
    if ANYONE in allowed or user in allowed:
        return True
    return any(g in allowed for g in user_groups)


@dataclass(frozen=True)
class Authority:
    """``may_decide`` for one user over every kind at once, bar what needs the approval
    itself (its kind and requester): the store checks those inside its one atomic script,
    so a click is one round trip and the rule is still decided here."""

    user_ok: bool  # a user id at all (and no separator in it)
    allow_self: bool
    per_kind: Mapping[str, bool]  # kinds with their own approver list → may this user
    default: bool  # every other kind

    def permits(self, kind: str, requested_by: str, user: str) -> bool:
        """What the script computes (tests hold it equal to ``may_decide``)."""
        if not self.user_ok or (user == requested_by and not self.allow_self):
            return False
        return self.per_kind.get(kind, self.default)


def authority(policy: ApprovalPolicy, user: str, user_groups: Iterable[str]) -> Authority:
    groups = tuple(user_groups)

    def allowed(entries: frozenset[str]) -> bool:
        return ANYONE in entries or user in entries or any(g in entries for g in groups)

    return Authority(user_ok=bool(user) and "," not in user,
                     allow_self=policy.allow_self_approval,
                     per_kind={k: allowed(v) for k, v in policy.per_kind.items()},
                     default=allowed(policy.approvers))


def refusal_is_self(policy: ApprovalPolicy, user: str, requested_by: str) -> bool:
    """Whether a refusal is due to the self-approval rule (for a precise message)."""
    return user == requested_by and not policy.allow_self_approval
