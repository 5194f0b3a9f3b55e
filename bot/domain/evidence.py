"""The evidence hash: what an approval was given on, as one ``sha256:`` value. Pure.

It is taken over the facts the approver is shown, not over their rendering: the host,
every finding's code, severity and evidence (the per-GPU table, the health grid and the
cleanup's list the thread shows are drawn from it) and every proposed action (kind,
parameters, reason, risk). Left out: the raw probe output (kept, shown only on demand),
the titles and details (words over those facts, some with a duration in them) and the
readings that only the clock moves (``CLOCK_KEYS``: how long a holder has run, the
uptime), so the hash of a host whose state has not changed does not change because a
minute passed. The flow stores it on the incident and on each approval, and every audit
entry of the action carries it; chat renders the same facts and never computes it.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from bot.domain.findings import Diagnosis

CLOCK_KEYS = frozenset({"elapsed_s", "uptime_s", "uptime"})


def stable(value: Any) -> Any:
    """``value`` without the readings only the clock moves (at any depth)."""
    if isinstance(value, dict):
        return {str(k): stable(v) for k, v in value.items() if k not in CLOCK_KEYS}
    if isinstance(value, list | tuple):
        return [stable(v) for v in value]
    return value


def evidence_facts(diagnosis: Diagnosis) -> dict[str, Any]:
    """What the hash is taken over (a stable, JSON-able shape)."""
    return {
        "host": diagnosis.host,
        "findings": [[f.code, f.severity.value, stable(f.evidence)] for f in diagnosis.findings],
        "actions": [[a.kind, sorted(a.params.items()), a.reason, a.risk]
                    for a in diagnosis.actions],
    }


def evidence_hash(diagnosis: Diagnosis) -> str:
    """``sha256:`` and 64 hex digits over ``evidence_facts`` (canonical JSON)."""
    blob = json.dumps(evidence_facts(diagnosis), sort_keys=True, separators=(",", ":"),
                      default=str, ensure_ascii=False)
    return "sha256:" + hashlib.sha256(blob.encode()).hexdigest()
