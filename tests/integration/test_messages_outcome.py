"""Issue 29, deliverable 5: the message after approval says what was done and what is true
now, through the assembled flow against real sim hosts over sshd and a real Redis.

The seed story and three other simulated fault hosts are driven alert → diagnosis →
Approve (→ the follow-ups) and the final message is read back as Slack would show it
(Block Kit through ``bot.chat.blockkit``). Stand-in: the chat backend (RecordingChat).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from redis import Redis

from bot.chat import blockkit as bk
from bot.chat.base import ChatMessage, MessageRef
from bot.config.settings import Settings
from bot.core import strings
from bot.demo.story import make_desk
from bot.domain.findings import ProposedAction
from bot.domain.incident import Alert
from bot.domain.lifecycle import IncidentState
from bot.flow.assembly import Flow, build_flow
from bot.sim.sshd import SimHost
from bot.ssh.pool import ParamikoPool
from storage.stores import open_stores
from tests.fixtures.bots import settle
from tests.helpers.chat import RecordingChat

ONCALL = "UONCALL"
UNIT = "vllm-kimi-k25-int4.service"
S = IncidentState
CLOCK = re.compile(r"since \d\d:\d\d UTC")
RANGE = re.compile(r"(\d+(?:\.\d+)?)(?: GiB)?–(\d+(?:\.\d+)?)")


@dataclass
class Bot:
    flow: Flow
    chat: RecordingChat
    sim: SimHost

    def open(self, kind: str) -> str:
        incident, created = self.flow.incidents.open_or_fold(
            Alert(source="test", host="gpu-01", kind=kind))
        assert created
        self.flow.diagnose.on_opened(incident.id)
        return incident.id

    def approve(self, approval_id: str) -> None:
        assert make_desk(self.flow).approve(approval_id, ONCALL).acted
        settle(self.flow)  # the click event, handled by the flow's consumer

    def pending(self, incident_id: str, kind: str) -> str:
        """The first open approval of ``kind`` in the message's order (first proposal or
        follow-up)."""
        incident = self.flow.incidents.require(incident_id)
        plans = [*incident.plans, *((incident.revert_plan,) if incident.revert_plan else ())]
        for plan in plans:
            approval = self.flow.approvals.get(plan.approval_id)
            if plan.action.kind == kind and approval is not None and approval.is_open:
                return plan.approval_id
        raise AssertionError(f"no open {kind}: {[p.action.kind for p in plans]}")

    def message(self, incident_id: str) -> ChatMessage:
        chat = self.flow.incidents.require(incident_id).chat
        assert chat is not None
        return self.chat.last_version(MessageRef(chat.channel, chat.ts))

    def lines(self, incident_id: str) -> list[str]:
        return visible(bk.to_payload(self.message(incident_id)))


def visible(payload: dict[str, Any]) -> list[str]:
    """What Slack shows: every text line; an actions row as its labels."""
    out: list[str] = []
    for block in payload["blocks"]:
        if block["type"] == "actions":
            out.append(" | ".join(e["text"]["text"] for e in block["elements"]))
        elif block["type"] == "context":
            out += [e["text"] for e in block["elements"]]
        else:
            out += block["text"]["text"].splitlines()
    return out


def buttons(message: ChatMessage) -> dict[str, dict[str, Any]]:
    """Every button as Block Kit renders it, by label."""
    return {e["text"]["text"]: e for b in bk.to_blocks(message) if b["type"] == "actions"
            for e in b["elements"]}


@pytest.fixture
def bot(redis: Redis, redis_url: str,
        sim_factory: Callable[..., SimHost]) -> Iterator[Callable[[str], Bot]]:
    pools: list[ParamikoPool] = []

    def make(scenario: str) -> Bot:
        sim = sim_factory(scenario)
        settings = Settings.model_validate({
            "redis_url": redis_url, "chat_backend": "terminal",
            "hosts": {"gpu-01": {"ssh": sim.target, "key": str(sim.key_path),
                                 "known_hosts": str(sim.known_hosts_path)}},
            "slack": {"approvers": [ONCALL]},
            "extra": {"remediation": {"settle_s": 0.3, "poll_interval_s": 0.2,
                                      "verify_timeout_s": 3.0, "restart_margin_s": 1.0,
                                      "term_grace_s": 1.0}}})
        pool = ParamikoPool(settings.ssh_defaults)
        pools.append(pool)
        chat = RecordingChat()
        return Bot(build_flow(settings, open_stores(settings.redis_url), pool, chat), chat, sim)

    yield make
    for pool in pools:
        pool.close()


def read_right(lines: list[str]) -> None:
    """No GB, no ``X–X`` range whose ends are equal, no ``1 ... files``, no raw kind."""
    text = "\n".join(lines)
    assert not re.search(r"\d ?GB\b", text), text
    assert not [m for m in RANGE.finditer(text) if m[1] == m[2]], text
    assert not re.search(r"\b1 (?:deleted )?files\b|\b1 GPUs\b", text), text
    assert "Run systemd." not in text and "Run process." not in text, text


def test_seed_story_final_message_leads_with_the_fix(bot: Callable[[str], Bot]) -> None:
    b = bot("seed")
    incident_id = b.open("vram_idle")
    b.approve(b.pending(incident_id, "systemd.stop_disable"))
    assert b.flow.incidents.require(incident_id).state is S.VERIFIED
    lines = b.lines(incident_id)
    assert lines[0].startswith(f"*gpu-01: Fixed: {UNIT} stopped and disabled; 8/8 GPUs free "
                               "since "), lines
    assert CLOCK.search(lines[0]) and "MiB" not in lines[0]
    assert lines[1].startswith(f"Was: {UNIT}, auto-started at boot, holds 8 GPUs × 75.8 GiB")
    text = "\n".join(lines)
    # the follow-up reads as a sentence; Revert is never primary and always asks first
    assert (f"*Proposed:* Keep {UNIT} from grabbing the GPUs again: add a start guard "
            "(drop-in)") in text, text
    assert f"Undo the fix: put {UNIT} back as it was (enabled, active)" in text
    shown = buttons(b.message(incident_id))
    assert shown["Revert"].get("style") is None and "confirm" in shown["Revert"]
    assert "Undo the fix on gpu-01" in shown["Revert"]["confirm"]["text"]["text"]
    read_right(lines)

    b.approve(b.pending(incident_id, "systemd.dropin"))
    incident = b.flow.incidents.require(incident_id)
    assert incident.state is S.VERIFIED and incident.last_outcome is not None
    lines = b.lines(incident_id)
    assert lines[0].startswith(f"*gpu-01: Fixed: {UNIT} stopped and disabled; start guard added "
                               f"to {UNIT} (drop-in); 8/8 GPUs free since "), lines
    assert CLOCK.search(lines[0])
    assert b.message(incident_id).text.startswith(  # what a phone shows says the same
        f"gpu-01: Fixed: {UNIT} stopped and disabled; start guard added")
    # two undo offers now (the drop-in's, and the stop's among the plans): each a plain
    # Revert with a confirm dialog, never a green Approve
    undo = {p.approval_id for p in incident.plans if p.action.kind == "systemd.revert"}
    assert incident.revert_plan is not None and len(undo) == 1
    undo.add(incident.revert_plan.approval_id)
    elements = [e for blk in bk.to_blocks(b.message(incident_id)) if blk["type"] == "actions"
                for e in blk["elements"] if e["value"] in undo]
    assert [e["text"]["text"] for e in elements] == ["Revert", "Deny", "Revert"], elements
    assert all("style" not in e for e in elements)
    assert all("confirm" in e for e in elements if e["text"]["text"] == "Revert")
    read_right(lines)

    assert make_desk(b.flow).incident("resolve", incident_id, ONCALL) == ""  # queued
    settle(b.flow)  # the Resolve button's click event
    told = [(n.user, n.text) for n in b.chat.ephemerals]  # the flow's answer, privately
    assert told == [(ONCALL, strings.INCIDENT_RESOLVED.format(id=incident_id))]
    assert b.flow.incidents.require(incident_id).state is S.RESOLVED
    lines = b.lines(incident_id)
    text = "\n".join(lines)
    assert lines[0].startswith(f"*gpu-01: Fixed: {UNIT} stopped and disabled"), lines
    assert "Approval expires" not in text and "Withdrawn" not in text
    print("\n--- seed story, final message ---\n" + "\n".join(lines))
    assert "Revert" not in text and "Undo the fix" not in text  # nobody took it: moot
    assert f"Approved by <@{ONCALL}>: stop {UNIT} and keep it from starting at boot" in text
    assert "*Proposed:*" not in text  # what was decided stays, as what was done
    read_right(lines)
    print("\n--- seed story, final message ---\n" + "\n".join(lines))


def test_ecc_host_with_vllm_final_message(bot: Callable[[str], Bot]) -> None:
    """The stop frees the GPUs but the headline is the broken GPU: "Done", never "Fixed",
    and the ECC error stays on the next line as what this did not fix."""
    b = bot("gpu_ecc_vllm")
    incident_id = b.open("vram_idle")
    b.approve(b.pending(incident_id, "systemd.stop_disable"))
    assert b.flow.incidents.require(incident_id).state is S.VERIFIED
    lines = b.lines(incident_id)
    assert lines[0].startswith(f"*gpu-01: Done: {UNIT} stopped and disabled; 8/8 GPUs free "
                               "since "), lines
    assert lines[1] == "Not fixed by this: GPU 5 (AB:00.0): uncorrectable ECC error", lines
    assert "Fixed" not in "\n".join(lines)
    read_right(lines)


def test_ladder_host_terminate_names_every_rung(bot: Callable[[str], Bot]) -> None:
    """A holder that ignores SIGTERM: the result says SIGTERM, then SIGKILL after the grace."""
    b = bot("ladder")
    incident_id = b.open("vram_idle")
    target = b.flow.hosts.target_for("gpu-01")
    b.flow.followups.offer(incident_id, ProposedAction("t1", "process.terminate", {"pid": "777"},
                                                   "asked for in the thread", "-"), target)
    b.flow.publisher.publish(incident_id)
    assert "*Proposed:* End PID 777" in "\n".join(b.lines(incident_id))
    b.approve(b.pending(incident_id, "process.terminate"))
    outcome = b.flow.incidents.require(incident_id).last_outcome
    assert outcome is not None and outcome.result is not None
    assert outcome.summary.startswith("sent SIGTERM to PID 777, then SIGKILL after 1 s"), \
        outcome.summary
    text = "\n".join(b.lines(incident_id))
    assert "MiB" not in text.split("```")[0] + text.split("```")[-1]  # outside the raw block
    assert "sent SIGTERM to PID 777, then SIGKILL after 1 s" in text, text
    assert "terminated PID" not in text
    read_right(b.lines(incident_id))


def test_respawn_host_stop_of_the_restarter_is_done_not_fixed(
        bot: Callable[[str], Bot]) -> None:
    """Stopping the watchdog verifies, but vLLM still holds the GPUs: the lead says what
    was done, that the GPUs are free of the watchdog and who still holds them (not this
    action's to free); the headline stays as what is not fixed."""
    b = bot("respawn")
    incident_id = b.open("vram_idle")
    b.approve(b.pending(incident_id, "systemd.stop_disable"))
    assert b.flow.incidents.require(incident_id).state is S.VERIFIED
    lines = b.lines(incident_id)
    assert lines[0].startswith("*gpu-01: Done: gpu-watchdog.service stopped and disabled; "
                               "8/8 GPUs free of it since "), lines
    assert lines[0].endswith(f"; still holding GPUs, not this action's to free: PID 440 "
                             f"({UNIT}) on GPU 0-7, 606.2 GiB*"), lines
    assert lines[1].startswith(f"Not fixed by this: {UNIT}, auto-started at boot, holds 8 GPUs"), \
        lines
    read_right(lines)


def test_no_escalate_button_when_escalation_has_nowhere_to_go(
        bot: Callable[[str], Bot]) -> None:
    b = bot("ladder")
    incident_id = b.open("vram_idle")
    b.flow.incidents.transition(incident_id, S.APPROVED, ONCALL, "test")
    b.flow.act.fail(incident_id, "process.terminate: nothing ran")
    b.flow.publisher.can_escalate = True  # as build_flow sets it where escalation is set up
    b.flow.publisher.publish(incident_id)
    assert "Escalate" in buttons(b.message(incident_id))
    b.flow.publisher.can_escalate = False  # as build_flow sets it where it is not
    b.flow.publisher.publish(incident_id)
    shown = buttons(b.message(incident_id))
    assert "Escalate" not in shown and "Retry" in shown
