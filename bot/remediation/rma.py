"""``rma.handoff``: a node that failed again after a passed health gate is handed to RMA.

The remote part collects ``nvidia-bug-report.sh`` (what NVIDIA's RMA process asks for) into
``/var/log/incident-bot/rma-INC-N.log.gz`` on the host, with ``--safe-mode`` (the parts
that can hang on a failing GPU are skipped: NVIDIA/open-gpu-kernel-modules#1150 saw the
full report freeze on one); verify reads the file's size back. The flow then keeps the
evidence bundle beside it (``bundle``): the report's path and size, the incident's
timeline and the health gate's results, audited and said in the thread. The node stays
out of service: nothing here returns it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from bot.core import strings
from bot.domain.action_result import ActionResult, Verification
from bot.remediation.catalog import rma_report_path
from bot.remediation.polling import ActionRun
from bot.remediation.probe_runner import run_probe
from playbooks.base import Probe, cmd
from playbooks.parsers.common import integer


def verify(ctx: ActionRun) -> Verification:
    """The report is on the host and not empty."""
    path = rma_report_path(ctx.params["incident"]) + ".gz"
    result, size = run_probe(ctx.runner, ctx.target, Probe(
        "rma_report", cmd("stat", "-c", "%s", path), lambda t: integer(t.strip() or "")),
        ctx.options.probe_timeout_s)
    ok = result.ok and size is not None and size > 0
    detail = (strings.RMA_REPORT_KEPT.format(path=path, size=size) if ok
              else strings.RMA_REPORT_MISSING.format(path=path))
    return Verification(ok, detail, evidence={"path": path, "bytes": size})


def bundle(result: ActionResult, timeline: Sequence[Mapping[str, Any]],
           gates: Sequence[Mapping[str, Any]], offence: Mapping[str, Any] | None
           ) -> dict[str, Any]:
    """The evidence bundle for the RMA ticket (pure): the report, the timeline, the gates."""
    ev = result.verification.evidence if result.verification is not None else {}
    return {"host": result.host, "incident": result.params.get("incident", ""),
            "bug_report": {"path": ev.get("path"), "bytes": ev.get("bytes")},
            "repeat_offence": dict(offence) if offence else None,
            "gates": [dict(g) for g in gates], "timeline": [dict(t) for t in timeline]}
