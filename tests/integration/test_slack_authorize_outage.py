"""A replica's first Slack request while Slack is down or slow (issue 39's chaos run: a
freshly restarted replica's first click made Bolt call ``auth.test``, the stand-in answered
12 s late, and the click was answered 500 "internal error … in slack request"). The bot is
authorized from its configured token: no ``auth.test`` on a request's path, so a Slack
outage never turns a click into an error of ours."""

from __future__ import annotations

import time

import pytest

from bot.chat import blockkit as bk
from bot.chat.render import IncidentHeader, render_incident
from bot.domain.findings import Diagnosis, DiagnosisStatus, Finding, Severity
from tests.fixtures.slack import CHANNEL, SlackRig

DIAG = Diagnosis("gpu-01", "gpu_xid", DiagnosisStatus.OK, 0.2,
                 (Finding("gpu.xid", Severity.CRITICAL, "Xid 79 on GPU 3"),))


def _timed(rig: SlackRig, ts: str, blocks: list[dict[str, object]]) -> tuple[int, str, float]:
    assert rig.sender is not None
    began = time.monotonic()
    resp = rig.sender.block_action("UALICE", "runbook", "gpu.xid", channel=CHANNEL,
                                   message_ts=ts, blocks=blocks)
    return resp.status_code, resp.text, time.monotonic() - began


@pytest.mark.parametrize("outage", ["auth_test_500", "slack_slow"])
def test_a_fresh_replicas_first_click_during_a_slack_outage_is_answered(
        slack_rig: SlackRig, outage: str) -> None:
    if outage == "auth_test_500":
        slack_rig.standin.fail("auth.test", times=10)
    msg = render_incident(IncidentHeader("42", "gpu-01", "gpu_xid", "critical", "no_action"),
                          DIAG, runbooks={"gpu.xid": "https://wiki.example/xid"})
    assert slack_rig.app is not None
    ref = slack_rig.app.backend.post(CHANNEL, msg)
    slack_rig.restart()  # a new replica: nothing cached from an earlier request
    if outage == "slack_slow":
        slack_rig.standin.slow(30.0, 12.0)  # every Web API call answered past the timeout
    status, text, took = _timed(slack_rig, ref.ts, bk.to_blocks(msg))
    assert status == 200, text
    assert "internal error" not in text.lower()
    assert took < 3.0  # within Slack's 3 s: nothing waited on Slack before the ack
    assert not slack_rig.standin.calls_of("auth.test")
