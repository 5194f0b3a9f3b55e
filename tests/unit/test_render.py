"""The incident message: headline, state line, one sentence per action with its buttons
(exact commands in the confirm), later states, the thread's evidence table, and hostile
host text neutralised."""

from __future__ import annotations

from dataclasses import replace

from bot.chat import blockkit as bk
from bot.chat.base import ButtonStyle, ChatMessage
from bot.chat.render import (
    ActionPlan,
    IncidentHeader,
    StepResult,
    decision_line,
    render_incident,
    thread_evidence,
)
from bot.chat.text import code_safe, to_plain
from bot.domain.approval import Approval, ApprovalAction, ApprovalStatus
from bot.domain.evidence import evidence_hash
from bot.domain.findings import (
    Diagnosis,
    DiagnosisStatus,
    Finding,
    ProbeResult,
    ProposedAction,
    Severity,
)

GPUS = [
    {
        "index": i,
        "memory_used_mib": 77_619,
        "memory_total_mib": 81_559,
        "utilization_pct": 0,
        "holder": {"name": "python3", "pid": 4242, "unit": "vllm-kimi-k25-int4.service"},
    }
    for i in range(8)
]
FINDING = Finding(
    "gpu.idle_vram_held",
    Severity.CRITICAL,
    "8 GPUs hold 75.8 GB at 0% utilization",
    "held by a unit enabled at boot",
    {"gpus": GPUS, "holders": [{"pid": 4242, "unit": "vllm-kimi-k25-int4.service",
                                "started_after_boot_s": 40}]},
)
ACTION = ProposedAction(
    "a1",
    "systemd.stop_disable",
    {"unit": "vllm-kimi-k25-int4.service"},
    "frees the GPUs; it restarts at boot otherwise",
    "the inference server goes down",
)
PROBE = ProbeResult("gpus", "nvidia-smi --query-gpu=index", 0, 0.05, stdout="0, 77619")
DIAG = Diagnosis("gpu-01", "vram_idle", DiagnosisStatus.OK, 0.41, (FINDING,), (ACTION,),
                 (PROBE,))
NOW = 1_700_000_600.0
INCIDENT = IncidentHeader("42", "gpu-01", "vram_idle", "critical", "awaiting_approval",
                          first_seen=NOW - 240)
COMMANDS = (
    "systemctl stop vllm-kimi-k25-int4.service",
    "systemctl disable vllm-kimi-k25-int4.service",
)
PLAN = ActionPlan(ACTION, COMMANDS, "apprid123")


def approval(status: ApprovalStatus, **kw: object) -> Approval:
    base = Approval(
        "apprid123",
        "42",
        ApprovalAction.of(ACTION, COMMANDS),
        "h",
        "alertmanager",
        1_700_000_000.0,
        1_700_001_800.0,
        status,
    )
    return replace(base, **kw)  # type: ignore[arg-type]


def render(*args: object, **kw: object) -> ChatMessage:
    return render_incident(*args, now=NOW, **kw)  # type: ignore[arg-type]


def test_awaiting_approval_message() -> None:
    msg = render(INCIDENT, DIAG, [PLAN])
    head, state, action = msg.sections
    assert head.text == ("*gpu-01: vllm-kimi-k25-int4.service, auto-started at boot, holds "
                         "8 GPUs × 75.8 GiB at 0%*")  # never the incident's age (4 min)
    assert state.text == ":raising_hand: Awaiting approval · incident 42 · opened 4 min ago"
    assert action.text.startswith("*Proposed:* Stop vllm-kimi-k25-int4.service and keep it")
    assert "(frees 606.4 GiB)" in action.text and "*Risk:* the inference server goes down" in (
        action.text)
    assert action.code is None and msg.header is None  # no catalog syntax, no raw evidence
    approve, deny = action.buttons
    assert (approve.action_id, approve.value, approve.style) == (
        "approve", "apprid123", ButtonStyle.PRIMARY)
    assert (deny.action_id, deny.value, deny.style) == ("deny", "apprid123", ButtonStyle.DEFAULT)
    assert approve.confirm is not None and all(c in approve.confirm for c in COMMANDS)
    assert msg.incident_id == "42" and msg.context == ()
    assert msg.text.startswith("gpu-01: vllm-kimi-k25-int4.service, auto-started at boot, "
                               "holds 8 GPUs")
    assert "Approve or deny" in msg.text
    assert [b["type"] for b in bk.to_blocks(msg)][:4] == ["section", "section", "section",
                                                          "actions"]
    labels = [b.label for b in msg.buttons]
    assert labels == ["Ack", "Snooze 30 min", "Snooze 2 h", "Snooze 1 d", "Resolve",
                      "Raw evidence"]
    assert msg.buttons[-1].action_id == "evidence" and msg.buttons[-1].value == "42"


def test_critical_incident_mentions_oncall_and_the_gpus_go_to_the_thread() -> None:
    msg = render(INCIDENT, DIAG, [PLAN], oncall="S0ONCALL")
    assert msg.text.startswith("<!subteam^S0ONCALL> gpu-01:")
    assert msg.sections[0].text.startswith("<!subteam^S0ONCALL> *")  # in a block: it pings
    warning = render(replace(INCIDENT, severity="warning"), DIAG, [PLAN], oncall="S0ONCALL")
    assert "subteam" not in warning.sections[0].text + warning.text
    (table,) = thread_evidence(DIAG)
    assert table.code is not None and len(table.code.splitlines()) == 1 + 8
    assert "75.8 / 79.6 GiB" in table.code and "4242" in table.code
    assert "4242" not in "".join(s.text for s in msg.sections)


def test_no_probes_no_evidence_button_and_other_warnings_on_one_line() -> None:
    disk = Finding("disk.full", Severity.WARNING, "/data is 97% full", "", {})
    note = Finding("x.info", Severity.INFO, "4 other units inactive", "", {})
    diag = replace(DIAG, findings=(FINDING, disk, note), probes=())
    msg = render(INCIDENT, diag, [PLAN])
    assert "evidence" not in [b.action_id for b in msg.buttons]
    assert msg.sections[2].text == "Also found: /data is 97% full"


def test_non_destructive_action_has_no_confirm() -> None:
    msg = render(INCIDENT, DIAG, [replace(PLAN, destructive=False)])
    assert all(b.confirm is None for b in msg.sections[2].buttons)


def test_pending_approval_shows_expiry_and_keeps_buttons() -> None:
    msg = render(INCIDENT, DIAG, [PLAN], {"apprid123": approval(ApprovalStatus.PENDING)})
    assert msg.context == ("Approval expires 22:43 UTC",)
    assert len(msg.sections[2].buttons) == 2


def test_later_states_edit_the_same_message() -> None:
    approved = approval(ApprovalStatus.APPROVED, approvers=("UALICE",), decided_by="UALICE")
    inc = replace(INCIDENT, state="verified")
    msg = render(
        inc,
        DIAG,
        [PLAN],
        {"apprid123": approved},
        results=[StepResult(True, "GPUs free: 8 × 0 MiB"), StepResult(False, "cron entry kept")],
        revert=ActionPlan(
            replace(ACTION, kind="systemd.enable_start"), ("systemctl enable x",), "rev1"
        ),
    )
    assert msg.sections[1].text.startswith(":white_check_mark: Verified · incident 42")
    assert "Approved by <@UALICE>" in msg.sections[2].text and msg.sections[2].buttons == ()
    assert ":white_check_mark: GPUs free: 8 × 0.0 GiB" in msg.sections[3].text  # chat says GiB
    assert ":x: cron entry kept" in msg.sections[3].text
    assert msg.sections[4].text.startswith("*Revert available*\n*Proposed:* Run ")
    (revert,) = msg.sections[4].buttons
    assert (revert.label, revert.action_id, revert.value) == ("Revert", "revert", "rev1")
    assert [b.label for b in msg.buttons] == ["Resolve", "Raw evidence"]


def test_decision_lines() -> None:
    assert decision_line(None) == ""
    assert decision_line(approval(ApprovalStatus.PENDING)) == ""
    waiting = decision_line(approval(ApprovalStatus.PENDING, approvers=("UALICE",), required=2))
    assert "waiting for a second approver" in waiting and "<@UALICE>" in waiting
    denied = decision_line(
        approval(ApprovalStatus.DENIED, decided_by="UBOB", reason="<!channel> not now")
    )
    assert "Denied by <@UBOB>" in denied and "&lt;!channel&gt; not now" in denied
    assert "Expired at 22:43 UTC" in decision_line(approval(ApprovalStatus.EXPIRED))


def test_hostile_host_text_is_escaped_everywhere() -> None:
    evil = "<!channel> ```\n*pwn* <https://evil|click>"
    finding = Finding(
        "x.y",
        Severity.WARNING,
        evil,
        evil,
        {
            "gpus": [{"index": 0, "holder": evil}],
        },
    )
    action = ProposedAction("a", "process.terminate", {"pid": evil}, evil, evil)
    diag = Diagnosis("h", "p", DiagnosisStatus.PARTIAL, 1.0, (finding,), (action,))
    msg = render(INCIDENT, diag, [ActionPlan(action, (f"kill {evil}",), "id1")])
    payload = bk.to_payload(msg)
    mrkdwn = [payload["text"], *_mrkdwn_texts(payload["blocks"])]  # plain_text is never parsed
    assert len(mrkdwn) >= 4  # notification, headline, state line, action
    assert not any("<!channel>" in t or "<https://evil" in t for t in mrkdwn)
    for section in msg.sections:
        assert section.code is None or section.code.count("```") == 0  # cannot close our fence
    assert "&lt;!channel&gt;" in msg.sections[0].text
    assert to_plain(msg.sections[0].text).startswith("*gpu-01: <!channel>")
    assert "End PID &lt;!channel&gt;" in msg.sections[2].text


def _mrkdwn_texts(node: object) -> list[str]:
    if isinstance(node, dict):
        found = [node["text"]] if node.get("type") == "mrkdwn" else []
        return found + [t for v in node.values() for t in _mrkdwn_texts(v)]
    if isinstance(node, list):
        return [t for v in node for t in _mrkdwn_texts(v)]
    return []


def test_evidence_table_tolerates_missing_values() -> None:
    gpus = [{"index": 3}, "junk",
            {"index": 4, "memory_used_mib": 10, "memory_total_mib": 0,
             "utilization_pct": 55.5, "holder": [{"unit": "a", "pid": 1}, "b"]}]
    finding = Finding("gpu.idle_vram_held", Severity.WARNING, "t", "", {"gpus": gpus})
    (table,) = thread_evidence(replace(DIAG, findings=(finding,)))
    lines = (table.code or "").splitlines()
    assert len(lines) == 3
    assert lines[1].split() == ["3", "?", "/", "?", "GiB", "?", "-", "-"]
    assert "56%" in lines[2] and lines[2].split()[-2:] == ["1", "a"]


def test_a_gpu_health_grid_goes_to_the_thread_not_the_parent() -> None:
    grid = "GPU  VERDICT\n0    broken"
    finding = Finding("gpu.broken", Severity.CRITICAL, "GPU 0 is broken", "", {"grid": grid})
    diag = replace(DIAG, findings=(finding,), actions=())
    msg = render(INCIDENT, diag, [])
    assert msg.sections[0].text == "*gpu-01: GPU 0 is broken*"
    assert all(s.code is None for s in msg.sections)
    (section,) = thread_evidence(diag)
    assert section.code == grid and section.text == "*GPU 0 is broken*"


def test_evidence_hash_tracks_what_is_shown() -> None:
    h1 = evidence_hash(DIAG)
    assert h1 == evidence_hash(DIAG) and h1.startswith("sha256:") and len(h1) == 71
    changed = [dict(g) for g in GPUS]
    changed[0]["utilization_pct"] = 50
    other = replace(DIAG, findings=(replace(FINDING, evidence={"gpus": changed}),))
    assert evidence_hash(other) != h1  # the thread's table changed
    risky = replace(DIAG, actions=(replace(ACTION, risk="everything burns"),))
    assert evidence_hash(risky) != h1  # the action sentence changed
    assert evidence_hash(replace(DIAG, probes=())) == h1  # raw output is not what was shown


def test_host_text_in_a_code_block_cannot_ping() -> None:
    assert code_safe("<!here> done") == "&lt;!here&gt; done"
