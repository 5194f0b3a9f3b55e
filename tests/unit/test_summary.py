"""Headline, state line, action sentence and notification for cases beyond the seed story."""

from __future__ import annotations

from bot.chat.render import render_incident
from bot.chat.summary import (
    action_sentence,
    evidence_table,
    headline,
    notification_text,
    state_line,
)
from bot.domain.findings import Diagnosis, DiagnosisStatus, Finding, ProposedAction, Severity
from bot.domain.incident import Incident
from bot.domain.incident_record import ActionPlan
from bot.domain.lifecycle import IncidentState

NOW = 1_764_600_000.0


def gpus(used: list[int], util: int = 0, pid: int = 77) -> list[dict[str, object]]:
    return [{"index": i, "memory_used_mib": u, "memory_total_mib": 97_887,
             "utilization_pct": util, "holder": [{"pid": pid, "unit": None}], "samples": 5}
            for i, u in enumerate(used)]


def incident(state: IncidentState = IncidentState.AWAITING_APPROVAL,
             severity: Severity = Severity.CRITICAL, age_s: float = 3 * 3600 + 600) -> Incident:
    return Incident(id="INC-9", host="gpu-07", kind="vram_idle", state=state,
                    severity=severity, first_seen=NOW - age_s)


def idle_finding(used: list[int], after_boot: float = 7200.0) -> Finding:
    holders = [{"pid": 77, "kind": "SGLang", "unit": None, "started_after_boot_s": after_boot,
                "elapsed_s": 9000, "used_mib": 195_200}]
    return Finding("gpu.idle_vram_held", Severity.CRITICAL, "x", evidence={
        "gpus": gpus(used), "holders": holders})


TERMINATE = ProposedAction("t1", "process.terminate", {"pid": "77"}, "r", "SIGTERM, then SIGKILL.")


def test_uneven_memory_a_bare_process_started_later() -> None:
    d = Diagnosis("gpu-07", "vram_idle", DiagnosisStatus.OK, 1.0,
                  (idle_finding([40_000, 77_600, 77_600]),), (TERMINATE,))
    # how long PID 77 has run (2 h 30 min), not the incident's age (3 h 10 min)
    assert headline(incident(), d, NOW) == (
        "gpu-07: PID 77 (SGLang) holds 3 GPUs, 39.1–75.8 GiB at 0% for 2 h 30 min")
    assert action_sentence(TERMINATE, d) == (
        "*Proposed:* End PID 77 (frees 190.6 GiB). *Risk:* SIGTERM, then SIGKILL.")
    table = evidence_table(d)
    assert table is not None and table.code is not None
    assert "highest of 5 samples" in table.text
    assert table.code.splitlines()[1].split()[-2:] == ["77", "-"]


def test_other_findings_use_their_title_in_gib_and_escaped() -> None:
    f = Finding("disk.full", Severity.WARNING, "/data is 99% full (1.8 GB free) <!channel>\nmore")
    d = Diagnosis("gpu-07", "disk_full", DiagnosisStatus.OK, 1.0, (f,))
    assert headline(incident(), d, NOW) == (
        "gpu-07: /data is 99% full (1.8 GiB free) &lt;!channel&gt;")


def test_notification_mentions_oncall_only_when_critical() -> None:
    d = Diagnosis("gpu-07", "vram_idle", DiagnosisStatus.OK, 1.0, (idle_finding([77_600]),),
                  (TERMINATE,))
    crit = notification_text(incident(), d, oncall="S0ONCALL")
    assert crit == ("<!subteam^S0ONCALL> gpu-07: PID 77 (SGLang) holds 1 GPU × 75.8 GiB at 0% "
                    "for 2 h 30 min. "
                    "Approve or deny: end PID 77?")
    warn = notification_text(incident(severity=Severity.WARNING), d, oncall="S0ONCALL")
    assert warn.startswith("gpu-07: PID 77")
    done = notification_text(incident(state=IncidentState.VERIFIED), d, oncall="not-a-group")
    assert done.endswith("Now verified.") and "subteam" not in done


def test_state_line_icon_follows_state_not_severity() -> None:
    a = state_line(incident(IncidentState.RESOLVED, Severity.CRITICAL), NOW)
    b = state_line(incident(IncidentState.RESOLVED, Severity.INFO), NOW)
    c = state_line(incident(IncidentState.ACTION_FAILED, Severity.INFO), NOW)
    assert a == b == ":heavy_check_mark: Resolved · incident INC-9 · opened 3 h 10 min ago"
    assert c.startswith(":x: Action failed ·")


def test_no_findings_and_unknown_action_kinds_still_read_as_words() -> None:
    odd = ProposedAction("o1", "vendor.fixit", {"host": "gpu-07"}, "r")  # not in the catalog
    d = Diagnosis("gpu-07", "vm_restart", DiagnosisStatus.PARTIAL, 1.0, (), (odd,))
    msg = render_incident(incident(), d, [ActionPlan(odd, (), "ap1")], now=NOW)
    texts = [s.text for s in msg.sections]
    assert texts[0] == "*gpu-07: no findings*"
    assert texts[2] == "*Proposed:* Run vendor.fixit on host gpu-07."
    assert [b.label for b in msg.sections[2].buttons] == ["Approve", "Deny"]


def test_also_found_groups_per_gpu_findings_and_skips_what_the_headline_says() -> None:
    from bot.chat.summary import also_found

    def wedged(i: int) -> Finding:
        return Finding("gpu.wedged", Severity.CRITICAL, f"GPU {i} is wedged: D", evidence={
            "gpu": {"index": i, "reasons": ["process 1312 in D state (uninterruptible)"]}})

    full = Finding("disk.full", Severity.CRITICAL, "/ is 100% full",
                   evidence={"filesystem": {"mount": "/", "used_pct": 100.0}})
    verdicts = Finding("gpu.verdicts", Severity.CRITICAL, "8 GPUs: 8 wedged",
                       evidence={"counts": {"wedged": 8}})
    d = Diagnosis("gpu-07", "vm_restart", DiagnosisStatus.OK, 1.0,
                  (full, verdicts, wedged(0), wedged(1)))
    assert also_found(d) == ["8 GPUs: 8 wedged", "GPUs 0, 1 are wedged: process 1312 in D state "
                             "(uninterruptible)"]
    gpu_first = Diagnosis("gpu-07", "vm_restart", DiagnosisStatus.OK, 1.0,
                          (verdicts, wedged(0), wedged(1)))
    assert also_found(gpu_first) == []  # the headline says them all
