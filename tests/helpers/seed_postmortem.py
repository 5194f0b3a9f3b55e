"""The seed story's incident written through the real stores with a fixed clock.

A VM with 8 GPUs restarted, a boot-enabled vLLM unit holds 75.8 GiB on each at 0%, the
on-call acks, approves the stop/disable, the GPUs are verified free, the extraction is
resumed and finishes hours later. Every write goes through ``IncidentStore`` and
``AuditLog`` into a real Redis, as the flow would write it; only the clock is fixed, so
the postmortem built from it is the same on every run (docs/postmortem-example.md).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from redis import Redis

from bot.domain.findings import (
    Diagnosis,
    DiagnosisStatus,
    Finding,
    ProbeResult,
    ProposedAction,
    Severity,
)
from bot.domain.incident import Alert
from bot.domain.incident_record import ActionPlan, ChatRefs
from bot.domain.lifecycle import IncidentState as St
from storage.audit import AuditLog, hash_evidence
from storage.incidents import IncidentStore

T0 = 1_795_871_550.0  # 2026-11-28 13:12:30 UTC: the alert arrives
ONCALL, BOT, HOST = "U0ALICE", "incident-bot", "gpu-01"
UNIT = "vllm-kimi-k25-int4.service"
CHANNEL = "C0INCIDENT"


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> float:
        return self.now

    def at(self, offset_s: float) -> None:
        self.now = T0 + offset_s


def diagnosis() -> Diagnosis:
    gpus = [{"index": i, "memory_used_mib": 77600, "memory_total_mib": 97887,
             "utilization_pct": 0, "holder": [{"pid": 440, "unit": UNIT}]} for i in range(8)]
    return Diagnosis(HOST, "vm_restart", DiagnosisStatus.OK, 0.79, findings=(
        Finding("boot.previous", Severity.CRITICAL, "booted 2 min ago; previous boot ended "
                "without a clean shutdown (crash, power loss or a killed VM)",
                evidence={"down_s": 95.0}),
        Finding("gpu.idle_vram_held", Severity.CRITICAL, f"8 GPUs hold 75.8 GB each at 0%: "
                f"PID 440 (vLLM) started at boot by {UNIT} (enabled, Restart=always)",
                evidence={"gpus": gpus}),
        Finding("boot.gpu_autostart", Severity.WARNING, f"{UNIT} is enabled and started at boot"),
        Finding("extract.interrupted", Severity.WARNING,
                "interrupted extraction job on this host (1): ex-5e3d1c0ffee0"),
    ), probes=(ProbeResult("gpus", "nvidia-smi --query-gpu=...", 0, 0.05),
               ProbeResult("gpu_processes", "nvidia-smi --query-compute-apps=...", 0, 0.04),
               ProbeResult("units", "systemctl list-units ...", 0, 0.06),
               ProbeResult("crontab_root", "crontab -l", 1, 0.01)))


def _stop_result(evidence: str) -> dict[str, Any]:
    runs = [{"name": n, "command": f"systemctl {n} {UNIT}", "exit_status": 0, "timed_out": False,
             "skipped": None} for n in ("stop", "disable")]
    return {"kind": "systemd.stop_disable", "params": {"unit": UNIT}, "host": HOST,
            "outcome": "succeeded", "ok": True, "approver": ONCALL, "evidence_hash": evidence,
            "commands": runs, "revertable": True, "summary": f"stopped and disabled {UNIT}; "
            "8/8 GPUs free (max 0 MiB) after 2.3 s",
            "revert_params": {"unit": UNIT, "active_state": "active",
                              "unit_file_state": "enabled"},
            "verification": {"ok": True, "detail": "8/8 GPUs free (max 0 MiB)", "evidence": {
                "window_note": f"checked 2.2 s after acting, past the {UNIT} restart window "
                               "(2.1 s)"}}}


def write_seed_incident(redis: Redis) -> str:
    """Write the story; returns the incident id."""
    clock = Clock()
    store, audit = IncidentStore(redis, group_wait_s=0, clock=clock), AuditLog(redis, clock=clock)
    incident, _ = store.open_or_fold(Alert("alertmanager", HOST, "vm_restart",
                                           summary=f"{HOST} booted 2 minutes ago",
                                           severity=Severity.CRITICAL))
    iid, diag = incident.id, diagnosis()
    evidence = hash_evidence(diag.to_dict())
    store.transition(iid, St.DIAGNOSING, BOT, "alert received")
    clock.at(0.8)
    revert = ActionPlan(ProposedAction("revert", "systemd.revert", {"unit": UNIT}, "undo"),
                        (f"systemctl unmask {UNIT}", f"systemctl enable {UNIT}",
                         f"systemctl start {UNIT}"), "ap-revert")
    store.update(iid, lambda i: replace(i, diagnosis=diag, evidence_hash=evidence,
                                        revert_plan=revert))
    store.transition(iid, St.AWAITING_APPROVAL, BOT, "4 findings, 1 proposed action", evidence)
    clock.at(1.4)
    chat = ChatRefs(CHANNEL, f"{T0 + 1.4:.6f}", f"{T0 + 1.4:.6f}",
                    f"https://example.slack.com/archives/{CHANNEL}/p{int((T0 + 1.4) * 1e6)}")
    store.update(iid, lambda i: replace(i, chat=chat))
    clock.at(104.0)
    audit.append(iid, ONCALL, "incident.ack", {"at": clock()})
    clock.at(131.0)
    audit.append(iid, ONCALL, "approval.approved", {"kind": "systemd.stop_disable",
                                                    "evidence_hash": evidence})
    store.transition(iid, St.APPROVED, ONCALL, "approved systemd.stop_disable", evidence)
    clock.at(131.6)
    store.transition(iid, St.REMEDIATING, ONCALL, "acting")
    audit.append(iid, ONCALL, "action.started", {"kind": "systemd.stop_disable",
                                                 "params": {"unit": UNIT}}, evidence)
    clock.at(134.2)
    result = _stop_result(evidence)
    audit.append(iid, ONCALL, "action.succeeded", result, evidence)
    store.transition(iid, St.VERIFIED, BOT, result["summary"])
    clock.at(134.9)
    audit.append(iid, BOT, "gate.passed", {"passed": True, "reasons": []})
    audit.append(iid, ONCALL, "action.succeeded", {
        "kind": "extraction.resume", "params": {"job": "ex-5e3d1c0ffee0"}, "outcome": "succeeded",
        "commands": [], "summary": "resumed extraction job ex-5e3d1c0ffee0: queued, "
        "18,283/37,312 done"}, evidence)
    store.transition(iid, St.RESUMED, BOT, "extraction ex-5e3d1c0ffee0 resumed")
    clock.at(134.9 + 17_462.0)
    store.transition(iid, St.RESOLVED, BOT, "kimi-k25 hidden states: completed 37,312/37,312 "
                     "· mean 1.09 samples/s · 1 corrupt file recomputed")
    return iid
