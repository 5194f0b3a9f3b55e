"""NVSwitch hosts: the fabric state tells them apart, and a refused single-GPU reset offers
the reboot (its own approval) instead."""

from __future__ import annotations

from pathlib import Path

from bot.core import strings
from bot.domain.action_result import ActionResult, Outcome
from bot.remediation.followup import offers
from bot.remediation.preflight import proposal
from playbooks.parsers.nvidia_xml import parse_query_xml

REAL = Path(__file__).parents[1] / "fixtures" / "real"


def test_a_host_without_nvswitches_reads_no_fabric_state() -> None:
    report = parse_query_xml((REAL / "smi_qx_575_laptop.xml").read_text())
    assert report.gpus and [g.fabric_state for g in report.gpus] == [None]


def test_a_refused_reset_on_an_nvswitch_host_offers_the_reboot() -> None:
    reboot = proposal("host.reboot", {}, strings.REM_PROPOSE_REBOOT_NVSWITCH.format(host="gpu-03"))
    assert reboot is not None and "stop nvidia-fabricmanager" in reboot["reason"]
    refused = ActionResult(kind="gpu.reset", params={"gpu": "2"}, host="gpu-03",
                           outcome=Outcome.REFUSED, summary="refused", approver="U1",
                           evidence_hash=None, proposals=(reboot,))
    assert [(a.kind, a.params) for a in offers(refused)] == [("host.reboot", {})]
