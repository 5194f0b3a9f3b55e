"""The incident message: header, findings with a GPU table, actions with exact commands and
buttons, later states, and hostile host text neutralised."""

from __future__ import annotations

from dataclasses import replace

from bot.chat import blockkit as bk
from bot.chat.base import ButtonStyle
from bot.chat.render import (
    ActionPlan,
    IncidentHeader,
    StepResult,
    decision_line,
    evidence_hash,
    gpu_table,
    render_incident,
)
from bot.chat.text import code_safe, to_plain
from bot.domain.approval import Approval, ApprovalStatus
from bot.domain.findings import Diagnosis, DiagnosisStatus, Finding, ProposedAction, Severity

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
    {"gpus": GPUS},
)
ACTION = ProposedAction(
    "a1",
    "systemd.stop_disable",
    {"unit": "vllm-kimi-k25-int4.service"},
    "frees the GPUs; it restarts at boot otherwise",
    "the inference server goes down",
)
DIAG = Diagnosis("gpu-01", "vram_idle", DiagnosisStatus.OK, 0.41, (FINDING,), (ACTION,))
INCIDENT = IncidentHeader("42", "gpu-01", "vram_idle", "critical", "awaiting_approval")
COMMANDS = (
    "systemctl stop vllm-kimi-k25-int4.service",
    "systemctl disable vllm-kimi-k25-int4.service",
)
PLAN = ActionPlan(ACTION, COMMANDS, "apprid123")


def approval(status: ApprovalStatus, **kw: object) -> Approval:
    base = Approval(
        "apprid123",
        "42",
        ACTION.to_dict(),
        "h",
        "alertmanager",
        1_700_000_000.0,
        1_700_001_800.0,
        status,
    )
    return replace(base, **kw)  # type: ignore[arg-type]


def test_awaiting_approval_message() -> None:
    msg = render_incident(INCIDENT, DIAG, [PLAN])
    assert msg.header is not None and "gpu-01" in msg.header and "vram_idle" in msg.header
    assert "critical" in msg.header and "awaiting approval" in msg.header
    finding = msg.sections[1]
    assert "8 GPUs hold 75.8 GB" in finding.text
    assert finding.code is not None and len(finding.code.splitlines()) == 1 + 8
    assert (
        "75.8 / 79.6 GiB (95%)" in finding.code
        and "vllm-kimi-k25-int4.service (pid 4242)" in finding.code
    )
    action = msg.sections[2]
    assert action.code == "\n".join(f"$ {c}" for c in COMMANDS)
    approve, deny = action.buttons
    assert (approve.action_id, approve.value, approve.style) == (
        "approve",
        "apprid123",
        ButtonStyle.PRIMARY,
    )
    assert (deny.action_id, deny.value, deny.style) == ("deny", "apprid123", ButtonStyle.DANGER)
    assert (
        approve.confirm is not None and "systemctl stop" in approve.confirm
    )  # destructive → confirm
    assert msg.incident_id == "42" and "awaiting approval" in msg.context[0]
    bk_blocks = bk.to_blocks(msg)
    assert [b["type"] for b in bk_blocks] == [
        "header",
        "section",
        "section",
        "section",
        "section",
        "section",
        "actions",
        "actions",  # the incident's own buttons: Ack, Snooze ×3, Resolve
        "context",
    ]
    labels = [b.label for b in msg.buttons]
    assert labels == ["Ack", "Snooze 30 min", "Snooze 2 h", "Snooze 1 d", "Resolve"]


def test_non_destructive_action_has_no_confirm() -> None:
    msg = render_incident(INCIDENT, DIAG, [replace(PLAN, destructive=False)])
    assert all(b.confirm is None for b in msg.sections[2].buttons)


def test_pending_approval_shows_expiry_and_keeps_buttons() -> None:
    msg = render_incident(INCIDENT, DIAG, [PLAN], {"apprid123": approval(ApprovalStatus.PENDING)})
    assert "approval expires 22:43 UTC" in msg.context[0]
    assert len(msg.sections[2].buttons) == 2


def test_later_states_edit_the_same_message() -> None:
    approved = approval(ApprovalStatus.APPROVED, approvers=("UALICE",), decided_by="UALICE")
    inc = replace(INCIDENT, state="verified")
    msg = render_incident(
        inc,
        DIAG,
        [PLAN],
        {"apprid123": approved},
        results=[StepResult(True, "GPUs free: 8 × 0 MiB"), StepResult(False, "cron entry kept")],
        revert=ActionPlan(
            replace(ACTION, kind="systemd.enable_start"), ("systemctl enable x",), "rev1"
        ),
    )
    assert "verified" in (msg.header or "")
    assert "Approved by <@UALICE>" in msg.sections[2].text and msg.sections[2].buttons == ()
    assert ":white_check_mark: GPUs free: 8 × 0 MiB" in msg.sections[3].text
    assert ":x: cron entry kept" in msg.sections[3].text
    (revert,) = msg.sections[4].buttons
    assert (revert.label, revert.action_id, revert.value) == ("Revert", "revert", "rev1")


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
    msg = render_incident(INCIDENT, diag, [ActionPlan(action, (f"kill {evil}",), "id1")])
    payload = bk.to_payload(msg)
    mrkdwn = [payload["text"], *_mrkdwn_texts(payload["blocks"])]  # plain_text is never parsed
    assert len(mrkdwn) > 5
    assert not any("<!channel>" in t or "<https://evil" in t for t in mrkdwn)
    for section in msg.sections:
        assert section.code is None or section.code.count("```") == 0  # cannot close our fence
    assert "&lt;!channel&gt;" in msg.sections[1].text
    assert to_plain(msg.sections[1].text).startswith(":large_orange_circle: *<!channel>")


def _mrkdwn_texts(node: object) -> list[str]:
    if isinstance(node, dict):
        found = [node["text"]] if node.get("type") == "mrkdwn" else []
        return found + [t for v in node.values() for t in _mrkdwn_texts(v)]
    if isinstance(node, list):
        return [t for v in node for t in _mrkdwn_texts(v)]
    return []


def test_gpu_table_tolerates_missing_values() -> None:
    table = gpu_table(
        [
            {"index": 3},
            "junk",
            {
                "index": 4,
                "memory_used_mib": 10,
                "memory_total_mib": 0,
                "utilization_pct": 55.5,
                "holder": [{"name": "a", "pid": 1}, "b"],
            },
        ]
    )
    lines = table.splitlines()
    assert len(lines) == 3
    assert "? / ? GiB" in lines[1] and lines[1].rstrip().endswith("-")
    assert "56%" in lines[2] and "a (pid 1), b" in lines[2]


def test_generic_evidence_is_listed_compactly() -> None:
    finding = Finding(
        "disk.full", Severity.WARNING, "disk full", "", {f"k{i}": {"v": i} for i in range(12)}
    )
    msg = render_incident(INCIDENT, replace(DIAG, findings=(finding,)), [])
    code = msg.sections[1].code or ""
    assert 'k0: {"v": 0}' in code and "… 4 more" in code


def test_evidence_hash_tracks_what_was_rendered() -> None:
    h1 = evidence_hash(DIAG)
    assert h1 == evidence_hash(DIAG) and h1.startswith("sha256:") and len(h1) == 71
    changed = [dict(g) for g in GPUS]
    changed[0]["utilization_pct"] = 50
    other = replace(DIAG, findings=(replace(FINDING, evidence={"gpus": changed}),))
    assert evidence_hash(other) != h1


def test_host_text_in_a_code_block_cannot_ping() -> None:
    assert code_safe("<!here> done") == "&lt;!here&gt; done"
