"""The line the incident thread shows for a policy's decision (issue 28). Pure.

``auto``: what ran without a click, under which policy and why it was allowed, with
Revert offered below by the flow. ``shadow``: what the policy would have run; nothing
ran. A fallback (limit, window, breaker): why the policy asks for a click this time.
A plain ``approve`` (or no policy) adds no line: the buttons say it already.
"""

from __future__ import annotations

from bot.core import strings
from bot.domain.policy import ActionLike, PolicyDecision, PolicyMode, period_words


def note_for(decision: PolicyDecision, action: ActionLike, host: str, done: str = "") -> str:
    """``done`` is the catalog's past tense (``ActionSpec.done``, "stopped and disabled")."""
    policy = decision.policy_name
    target = action.params.get("unit") or action.params.get("job") or action.kind
    if decision.mode is PolicyMode.AUTO:
        return strings.POLICY_AUTO_DONE.format(done=(done or action.kind).capitalize(),
                                               target=target, host=host, policy=policy,
                                               why=_why(decision))
    if decision.mode is PolicyMode.SHADOW:
        return strings.POLICY_SHADOW_NOTE.format(policy=policy, kind=action.kind, host=host)
    if decision.fell_back:
        return strings.POLICY_FELL_BACK.format(policy=policy, kind=action.kind, host=host,
                                               reason=decision.reason)
    return ""


def _why(decision: PolicyDecision) -> str:
    """``1 of 3 hosts in the last hour: gpu-03`` (no limit: the decision's reason)."""
    limit = decision.policy.limit if decision.policy else None
    if limit is None:
        return decision.reason
    return strings.POLICY_AUTO_WHY.format(n=len(decision.hosts), max=limit.max_hosts,
                                          period=period_words(limit.per_s),
                                          hosts=", ".join(sorted(decision.hosts)))
