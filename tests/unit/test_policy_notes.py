"""The thread lines for the policy's decisions, as a person reads them."""

from __future__ import annotations

from bot.chat.policy_notes import note_for
from bot.domain.policy import (
    ActionRef,
    BlastLimit,
    Policy,
    PolicyDecision,
    PolicyMatch,
    PolicyMode,
    limit_text,
)

STOP = ActionRef("systemd.stop_disable", {"unit": "vllm-kimi-k25-int4.service"})
AUTO = Policy("stop-autostarted-inference", PolicyMatch(), PolicyMode.AUTO, BlastLimit(3))
SHADOW = Policy("try-masks", PolicyMatch(), PolicyMode.SHADOW)


def test_the_four_lines() -> None:
    ran = note_for(PolicyDecision(PolicyMode.AUTO, AUTO, "r", ("gpu-03",)), STOP, "gpu-03",
                   "stopped and disabled")
    assert ran == (":robot_face: Stopped and disabled `vllm-kimi-k25-int4.service` on gpu-03 "
                   "without a click, under policy `stop-autostarted-inference` (1 of 3 hosts "
                   "in the last hour: gpu-03). Revert below if this was wrong.")
    shadow = note_for(PolicyDecision(PolicyMode.SHADOW, SHADOW, "r"), STOP, "gpu-01")
    assert shadow.startswith(":eyes: Shadow mode: policy `try-masks` would have run "
                             "`systemd.stop_disable` on gpu-01 without a click. Nothing ran")
    hosts = ("gpu-03", "gpu-07", "gpu-11")
    fell = note_for(PolicyDecision(PolicyMode.APPROVE, AUTO, limit_text(AUTO, hosts), hosts),
                    STOP, "gpu-12")
    assert fell == (":raised_hand: Policy `stop-autostarted-inference` did not run "
                    "`systemd.stop_disable` on gpu-12: limit reached: 3 hosts in the last hour "
                    "(gpu-03, gpu-07, gpu-11).")
    assert note_for(PolicyDecision(PolicyMode.APPROVE, None, "none"), STOP, "gpu-01") == ""
