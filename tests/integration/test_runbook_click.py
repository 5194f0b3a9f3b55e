"""A runbook link button's click reaches the Bolt app signed, is acknowledged, does nothing."""

from __future__ import annotations

from bot.chat import blockkit as bk
from bot.chat.render import IncidentHeader, render_incident
from bot.domain.findings import Diagnosis, DiagnosisStatus, Finding, Severity
from tests.fixtures.slack import CHANNEL, SlackRig

DIAG = Diagnosis("gpu-01", "gpu_xid", DiagnosisStatus.OK, 0.2,
                 (Finding("gpu.xid", Severity.CRITICAL, "Xid 79 on GPU 3"),))


def test_a_runbook_click_is_acked_and_changes_nothing(slack_rig: SlackRig) -> None:
    msg = render_incident(IncidentHeader("42", "gpu-01", "gpu_xid", "critical", "no_action"),
                          DIAG, runbooks={"gpu.xid": "https://wiki.example/xid"})
    assert slack_rig.app is not None and slack_rig.sender is not None
    ref = slack_rig.app.backend.post(CHANNEL, msg)
    blocks = bk.to_blocks(msg)
    assert any(e.get("url") == "https://wiki.example/xid"
               for b in blocks if b["type"] == "actions" for e in b["elements"])
    posted = [c for c in slack_rig.standin.calls if c.method != "auth.test"]
    resp = slack_rig.sender.block_action("UALICE", "runbook", "gpu.xid", channel=ref.channel,
                                         message_ts=ref.ts, blocks=blocks)
    assert resp.status_code == 200, resp.text  # Bolt answers 404 to an action nobody handles
    slack_rig.drain()
    after = [c for c in slack_rig.standin.calls if c.method != "auth.test"]  # Bolt's own check
    assert after == posted and slack_rig.approved == []
