"""The RMA hand-off: a node whose fault came back after a passed health gate is handed over,
not returned to work.

The remote part collects ``nvidia-bug-report.sh`` (what NVIDIA's RMA process asks for) into
``/var/log/incident-bot/rma-INC-N.log.gz`` on the host, with ``--safe-mode`` (the parts
that can hang on a failing GPU are skipped: NVIDIA/open-gpu-kernel-modules#1150 saw the
full report freeze on one); verify reads the file's size back. The flow then keeps the
evidence bundle beside it (``bundle``): the report's path and size, the incident's
timeline and the health gate's results, audited and said in the thread. The node stays
out of service: nothing here returns it.

Proposed by the flow's repeat watch (``bot/flow/repeat_watch.py``), never by a playbook:
what makes a node a repeat offender is its history, not what the host shows now, so it
runs without a fresh diagnosis first (``reprobe_first = False``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import BeforeValidator

from bot.core import strings
from bot.domain import validate
from bot.domain.action_result import ActionResult, Seen, Verification
from bot.domain.findings import ProposedAction
from bot.domain.host_state import CapturedState
from bot.remediation.actions.base import Action, ActionParams, ParamHelp
from bot.remediation.probe_runner import run_probe
from bot.remediation.spec import RemoteStep
from playbooks.base import Probe, cmd
from playbooks.parsers.common import integer

if TYPE_CHECKING:
    from bot.remediation.polling import ActionRun

RMA_DIR = "/var/log/incident-bot"


def report_path(incident: str) -> str:
    """Where ``nvidia-bug-report.sh --output-file`` writes (it appends ``.gz``)."""
    return f"{RMA_DIR}/rma-{incident}.log"


class RmaParams(ActionParams):
    incident: Annotated[str, BeforeValidator(validate.incident_ref),
                        ParamHelp("the incident the report is for")]


class RmaHandoff(Action):
    kind = "rma.handoff"
    title = strings.ACT_TITLE_RMA
    risk = strings.ACT_RISK_RMA
    Params = RmaParams
    reprobe_first = False  # a repeat offence is the node's history, not a finding now
    hands_to_rma = True
    phrase_template = strings.MSG_ACTION_RMA

    def render(self, p: Mapping[str, str]) -> tuple[RemoteStep, ...]:
        return (RemoteStep("mkdir", ("mkdir", "-p", RMA_DIR), 10.0),
                RemoteStep("bug_report", ("nvidia-bug-report.sh", "--safe-mode", "--output-file",
                                          report_path(p["incident"])), 900.0))

    def subject(self, p: Mapping[str, str], host: str) -> str:
        return host

    def verify(self, ctx: ActionRun, captured: CapturedState, patient: bool = True
               ) -> Verification:
        """The report is on the host and not empty."""
        path = report_path(ctx.params["incident"]) + ".gz"
        result, size = run_probe(ctx.runner, ctx.target, Probe(
            "rma_report", cmd("stat", "-c", "%s", path), lambda t: integer(t.strip() or "")),
            ctx.options.probe_timeout_s)
        ok = result.ok and size is not None and size > 0
        detail = (strings.RMA_REPORT_KEPT.format(path=path, size=size) if ok
                  else strings.RMA_REPORT_MISSING.format(path=path))
        return Verification(Seen.of(ok), detail, evidence={"path": path, "bytes": size})


def rma_action(host: str, incident_id: str) -> ProposedAction:
    """The hand-off proposed for ``host``, its report named after the incident."""
    return RmaHandoff.propose(host, {"incident": incident_id},
                              strings.RMA_PROPOSE.format(host=host))


def bundle(result: ActionResult, timeline: Sequence[Mapping[str, Any]],
           gates: Sequence[Mapping[str, Any]], offence: Mapping[str, Any] | None
           ) -> dict[str, Any]:
    """The evidence bundle for the RMA ticket (pure): the report, the timeline, the gates."""
    ev = result.verification.evidence if result.verification is not None else {}
    return {"host": result.host, "incident": result.params.get("incident", ""),
            "bug_report": {"path": ev.get("path"), "bytes": ev.get("bytes")},
            "repeat_offence": dict(offence) if offence else None,
            "gates": [dict(g) for g in gates], "timeline": [dict(t) for t in timeline]}
