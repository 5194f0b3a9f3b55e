"""Pending approvals in Redis, claimed atomically so an action runs exactly once.

Each approval is a hash under ``keys.approval(id)``; its opaque random id is the Slack
button's value. A click is checked and applied in one Lua script (status, expiry,
approvers so far, two-person count), so double clicks, concurrent clicks, Slack's retries
and several bot replicas all see one winner. Authorisation is decided in Python by the
pure policy first (it depends only on immutable fields: kind and requester). Records are
in Redis (AOF), so pending approvals survive a bot restart.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any, cast

from redis import Redis
from redis.client import Pipeline
from redis.exceptions import WatchError

from bot.domain.approval import (
    WITHDRAWN_RESOLVED,
    Approval,
    ApprovalAction,
    ApprovalPolicy,
    ApprovalStatus,
    ClaimOutcome,
    Resolver,
    authority,
)
from storage import keys
from storage.approval_scripts import (
    CANCEL_LUA,
    CLAIM_LUA,
    DENY_LUA,
    EXPIRE_LUA,
    MEMBERS_LUA,
    WITHDRAW_LUA,
)
from storage.audit import GLOBAL_MAXLEN, MAX_TEXT, AuditLog
from storage.connection import lost_while_watching
from storage.events import MAXLEN as EVENTS_MAXLEN

RETENTION_S = 30 * 86400  # decided records are kept this long after expiry, for audits

@dataclass(frozen=True)
class ClaimResult:
    outcome: ClaimOutcome
    approval: Approval | None  # the record as it stood right after this call
    changed: bool = False  # this call wrote something (first approval, claim, deny, expiry)


@dataclass(frozen=True)
class Withdrawal:
    """Why an incident's pending approvals are withdrawn with its resolve: who resolved it
    (user id, the bot's user, or the alert's source), in which role, and when."""

    by: str
    resolver: Resolver
    at: float
    reason: str = WITHDRAWN_RESOLVED


def watch_pending(pipe: Pipeline, incident_ids: Iterable[str]) -> dict[str, list[str]]:
    """WATCH each incident's set of approvals and read it (in the caller's WATCH phase, before
    its MULTI): an approval created after this read fails the caller's EXEC, so none escapes
    the withdrawal that ``withdraw_in`` queues."""
    ids = sorted(set(incident_ids))
    if not ids:
        return {}
    names = [keys.approvals_of_incident(i) for i in ids]
    pipe.watch(*names)
    rows = cast(list[list[Any]], pipe.eval(MEMBERS_LUA, len(names), *names))
    return {i: sorted(_s(x) for x in row) for i, row in zip(ids, rows, strict=True) if row}


def mark_resolved_in(pipe: Pipeline, incident_id: str, why: Withdrawal) -> None:
    """Queue, in the resolve's MULTI, the marker a later claim or deny reads: an approval
    created after the resolve is withdrawn by the first click on it, never run."""
    pipe.set(keys.approvals_resolver(incident_id), resolver_marker(why), ex=RETENTION_S)


def parse_marker(raw: Any) -> Withdrawal | None:
    """The resolve marker back (None when the incident has not resolved)."""
    if raw is None:
        return None
    how, by, at = _s(raw).split("\t", 2)
    return Withdrawal(by, Resolver(how), float(at))


def resolver_marker(why: Withdrawal) -> str:
    return "\t".join((why.resolver.value, why.by.replace("\t", " ")[:MAX_TEXT] or "unknown",
                      repr(why.at)))


def withdraw_in(pipe: Pipeline, incident_id: str, approval_ids: Iterable[str],
                why: Withdrawal) -> None:
    """Queue, in the caller's MULTI, the withdrawal of every one of ``approval_ids`` that is
    still pending when the transaction runs, each audited ``approval.cancelled``: it commits
    in the same EXEC as the resolve, so nobody sees the incident resolved with an approval
    still open, and a click racing the resolve either wins before it or finds it cancelled.
    The EXEC result for this command is the list of ids it withdrew."""
    names = [keys.approval(a) for a in approval_ids if _valid_id(a)]
    if not names:
        return
    pipe.eval(WITHDRAW_LUA, 3 + len(names), keys.approvals_pending(), keys.audit(incident_id),
              keys.audit_all(), *names, incident_id, why.by[:MAX_TEXT] or "unknown",
              repr(why.at), f"{why.at:.6f}", why.reason, why.resolver.value, GLOBAL_MAXLEN)


class ApprovalStore:
    """Create, claim, deny and expire approvals; needs a ``decode_responses`` client."""

    def __init__(self, redis: Redis) -> None:
        self.redis = redis
        self._claim = redis.register_script(CLAIM_LUA)
        self._deny = redis.register_script(DENY_LUA)
        self._expire = redis.register_script(EXPIRE_LUA)
        self._cancel = redis.register_script(CANCEL_LUA)

    def create(
        self,
        incident_id: str,
        action: ApprovalAction,
        *,
        evidence_hash: str,
        requested_by: str,
        now: float,
        policy: ApprovalPolicy,
    ) -> Approval:
        """Store a pending approval with a fresh unguessable id (the button's value); one
        for an incident that already resolved is stored withdrawn (``status`` says so)."""
        kind = action.kind
        approval = Approval(
            id=secrets.token_urlsafe(12),
            incident_id=incident_id,
            action=action,
            evidence_hash=evidence_hash,
            requested_by=requested_by,
            created_at=now,
            expires_at=now + policy.expiry_s,
            required=policy.required_for(kind),
        )
        for _ in range(3):
            try:
                return self._store_new(approval, policy)
            except WatchError as exc:  # its incident resolved meanwhile: stored withdrawn
                if (lost := lost_while_watching(exc)) is not None:
                    raise lost from None  # Redis refused, not a conflict
                continue
        return self._store_new(approval, policy)

    def _store_new(self, approval: Approval, policy: ApprovalPolicy) -> Approval:
        """One MULTI: the record, its pending entry, its place in the incident's set. If the
        incident already resolved (a diagnosis that finished after the alert cleared), the
        record is stored withdrawn, like those the resolve withdrew, and audited."""
        key, marker = keys.approval(approval.id), keys.approvals_resolver(approval.incident_id)
        with self.redis.pipeline(transaction=True) as pipe:
            pipe.watch(marker)
            why = parse_marker(pipe.get(marker))
            if why is not None:
                approval = replace(approval, status=ApprovalStatus.CANCELLED, decided_by=why.by,
                                   decided_at=why.at, reason=why.reason,
                                   resolved_by=why.resolver)
            ttl = int(policy.expiry_s + RETENTION_S)
            pipe.multi()
            pipe.hset(key, mapping=_to_hash(approval))
            pipe.expire(key, ttl)
            if why is None:
                pipe.zadd(keys.approvals_pending(), {approval.id: approval.expires_at})
            else:
                AuditLog(self.redis).add_to(pipe, approval.incident_id, why.by,
                                            "approval.cancelled", {
                                                "approval_id": approval.id,
                                                "kind": approval.kind, "reason": why.reason,
                                                "resolved_by": why.resolver.value},
                                            ts=why.at)
            pipe.sadd(keys.approvals_of_incident(approval.incident_id), approval.id)
            pipe.expire(keys.approvals_of_incident(approval.incident_id), ttl)
            pipe.execute()
        return approval

    def get(self, approval_id: str) -> Approval | None:
        if not _valid_id(approval_id):
            return None
        data = cast(dict[Any, Any], self.redis.hgetall(keys.approval(approval_id)))
        return _from_hash(_decode_map(data)) if data else None

    def attach_message(self, approval_id: str, channel: str, ts: str) -> None:
        """Remember where the button was posted (expiry sweeps edit that message)."""
        key = keys.approval(approval_id)
        if self.redis.exists(key):
            self.redis.hset(key, mapping={"channel": channel, "message_ts": ts})

    def claim(
        self,
        approval_id: str,
        user: str,
        now: float,
        policy: ApprovalPolicy,
        groups_of_user: Iterable[str] = (),
        *,
        announce: bool = True,
    ) -> ClaimResult:
        """Record ``user``'s approval; CLAIMED means this call, and only this, completed it.
        The claim (or the expiry this click found) goes on the incident events stream in
        the same script (``click.approved``, ``click.expired``) for the flow's consumer;
        ``announce=False``: a caller in the flow that acts on its claim itself (a policy)."""
        return self._decide(self._claim, approval_id, user, now, policy, groups_of_user,
                            announce=announce)

    def deny(
        self,
        approval_id: str,
        user: str,
        reason: str,
        now: float,
        policy: ApprovalPolicy,
        groups_of_user: Iterable[str] = (),
    ) -> ClaimResult:
        """Deny with a reason; DENIED with ``changed`` means this call denied it (and put
        ``click.denied`` on the incident events stream in the same script)."""
        return self._decide(self._deny, approval_id, user, now, policy, groups_of_user, reason)

    def _decide(
        self,
        script: Any,
        approval_id: str,
        user: str,
        now: float,
        policy: ApprovalPolicy,
        groups: Iterable[str],
        reason: str = "",
        *,
        announce: bool = True,
    ) -> ClaimResult:
        if not _valid_id(approval_id):
            return ClaimResult(ClaimOutcome.NOT_FOUND, None)
        # one round trip: the user's rights over every kind go in, the script reads the
        # approval's kind and requester and checks and applies everything atomically
        who = authority(policy, user, groups)
        # the incident id is immutable: read it first to name its resolve marker
        incident_id = _s(self.redis.hget(keys.approval(approval_id), "incident_id") or "-")
        raw = script(
            keys=[keys.approval(approval_id), keys.approvals_pending(),
                  keys.approvals_resolver(incident_id), keys.incident_events(),
                  keys.audit(incident_id), keys.audit_all()],
            args=[approval_id, user, repr(now), _flag(who.user_ok), reason,
                  _flag(who.allow_self), json.dumps(dict(who.per_kind)), _flag(who.default),
                  _flag(announce), EVENTS_MAXLEN, GLOBAL_MAXLEN],
        )
        items = [_s(x) for x in raw]
        outcome, changed, flat = ClaimOutcome(items[0]), items[1] == "1", items[2:]
        record = _from_hash(dict(zip(flat[::2], flat[1::2], strict=True))) if flat else None
        return ClaimResult(outcome, record, changed)

    def cancel(self, approval_id: str, actor: str, reason: str, now: float) -> bool:
        """Withdraw a still-pending approval (an alternative was approved); True if this did."""
        if not _valid_id(approval_id):
            return False
        return bool(
            self._cancel(
                keys=[keys.approval(approval_id), keys.approvals_pending()],
                args=[approval_id, actor, repr(now), reason],
            )
        )

    def expire_due(self, now: float, actor: str = "bot") -> list[Approval]:
        """Mark pending approvals past their expiry as expired; return those this call expired
        (each audited as ``actor``'s and announced as ``click.expired`` on the incident
        events stream, in the same script)."""
        due = cast(list[Any], self.redis.zrangebyscore(keys.approvals_pending(), "-inf", now))
        expired: list[Approval] = []
        for approval_id in (_s(x) for x in due):
            incident_id = _s(self.redis.hget(keys.approval(approval_id), "incident_id") or "-")
            if self._expire(
                keys=[keys.approval(approval_id), keys.approvals_pending(),
                      keys.approvals_resolver(incident_id), keys.incident_events(),
                      keys.audit(incident_id), keys.audit_all()],
                args=[approval_id, "", repr(now), "", "", "", "", "", "", EVENTS_MAXLEN,
                      GLOBAL_MAXLEN, actor],
            ):
                record = self.get(approval_id)
                if record is not None:
                    expired.append(record)
        return expired

    def pending(self) -> list[Approval]:
        ids = [_s(x) for x in cast(list[Any], self.redis.zrange(keys.approvals_pending(), 0, -1))]
        return [a for a in (self.get(i) for i in ids) if a is not None and a.is_open]

    def for_incident(self, incident_id: str) -> list[Approval]:
        ids = sorted(
            _s(x)
            for x in cast(set[Any], self.redis.smembers(keys.approvals_of_incident(incident_id)))
        )
        found = [a for a in (self.get(i) for i in ids) if a is not None]
        return sorted(found, key=lambda a: a.created_at)


def _valid_id(approval_id: str) -> bool:
    """Button values come from the network: only our own id alphabet reaches Redis keys."""
    return 0 < len(approval_id) <= 64 and all(c.isalnum() or c in "-_" for c in approval_id)


def _s(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _json_object(text: str) -> dict[str, Any]:
    """A stored JSON object; {} for anything else (a damaged field loads as no action)."""
    try:
        value = json.loads(text)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _decode_map(data: Mapping[Any, Any]) -> dict[str, str]:
    return {_s(k): _s(v) for k, v in data.items()}


def _to_hash(a: Approval) -> dict[str, str]:
    return {
        "id": a.id,
        "incident_id": a.incident_id,
        "action": json.dumps(a.action.to_json(), sort_keys=True),
        "evidence_hash": a.evidence_hash,
        "requested_by": a.requested_by,
        "created_at": repr(a.created_at),
        "expires_at": repr(a.expires_at),
        "status": a.status.value,
        "required": str(a.required),
        "approvers": ",".join(a.approvers),
        "decided_by": a.decided_by,
        "decided_at": repr(a.decided_at),
        "reason": a.reason,
        "channel": a.channel,
        "message_ts": a.message_ts,
        "resolved_by": a.resolved_by.value if a.resolved_by else "",
    }


def _from_hash(d: Mapping[str, str]) -> Approval:
    return Approval(
        id=d["id"],
        incident_id=d.get("incident_id", ""),
        action=ApprovalAction.from_json(_json_object(d.get("action", "{}"))),
        evidence_hash=d.get("evidence_hash", ""),
        requested_by=d.get("requested_by", ""),
        created_at=float(d.get("created_at", 0)),
        expires_at=float(d.get("expires_at", 0)),
        status=ApprovalStatus(d.get("status", "pending")),
        required=int(d.get("required", 1)),
        approvers=tuple(u for u in d.get("approvers", "").split(",") if u),
        decided_by=d.get("decided_by", ""),
        decided_at=float(d.get("decided_at", 0) or 0),
        reason=d.get("reason", ""),
        channel=d.get("channel", ""),
        message_ts=d.get("message_ts", ""),
        resolved_by=Resolver(d["resolved_by"]) if d.get("resolved_by") else None,
    )


def _flag(value: bool) -> str:
    return "1" if value else "0"
