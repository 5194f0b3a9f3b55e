"""``/ir`` and buttons under one authority rule: refusals are private, give the reason and
are audited (a request without a user as "unknown user"); ``/ir`` accepts only what the
stores accept; a handler's user error is its answer, not "Something went wrong"."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlencode

import pytest
from redis import Redis

from bot.config.policy import policy_from_settings
from bot.core import strings
from bot.domain.approval import ApprovalAction, ApprovalStatus
from bot.rig.slack_standin import SlackStandIn
from storage.approvals import ApprovalStore
from storage.audit import AuditLog
from tests.fixtures.slack import SlackRig, slack_test_settings
from tests.helpers.slash_handlers import StoreHandlers

NO_JOB = "ex-000000000000"


@pytest.fixture
def rig(slack_standin: SlackStandIn, redis: Redis, redis_url: str) -> Iterator[SlackRig]:
    handlers = StoreHandlers(redis_url)
    started = SlackRig(slack_standin, slack_test_settings(slack_standin), redis,
                       slash=handlers).start()
    yield started
    started.stop()
    handlers.close()


def reply(rig: SlackRig, user: str, text: str) -> tuple[str, str]:
    """(text, response_type) of the answer to one ``/ir``: the ack's, or the response_url's."""
    assert rig.sender is not None
    before = len(rig.standin.calls_of("response_url"))
    ack = rig.sender.slash(user, "/ir", text)
    assert ack.status_code == 200, ack.text
    if ack.content and ack.json().get("text"):
        return ack.json()["text"], ack.json().get("response_type", "")
    call = rig.standin.wait_for("response_url", before + 1)[-1]
    return str(call.params["text"]), str(call.params["response_type"])


def global_audit(redis: Redis) -> list[tuple[str, str, dict[str, Any]]]:
    return [(e.actor, e.action, e.detail) for e in AuditLog(redis).recent()]


def test_unknown_job_is_no_such_job(rig: SlackRig) -> None:
    text, kind = reply(rig, "UMALLORY", f"job {NO_JOB}")
    assert text == f"no such job {NO_JOB}" and kind == "ephemeral"


def test_snooze_past_the_stores_cap_is_refused_by_ir(rig: SlackRig) -> None:
    text, _ = reply(rig, "UALICE", "snooze INC-1 30d")
    assert "at most 7 days" in text
    ok, _ = reply(rig, "UALICE", "snooze INC-1 7d")
    assert ok == "done"
    assert rig.slash.calls == [("snooze", "UALICE", "INC-1", 7 * 86400)]  # type: ignore[union-attr]
    assert "at most 30 days" in reply(rig, "UALICE", "silence gpu-01 gpu_ecc 31d")[0]


def test_silence_by_a_non_approver_is_refused_privately_and_audited(rig: SlackRig,
                                                                   redis: Redis) -> None:
    text, kind = reply(rig, "UMALLORY", "silence gpu-01 gpu_ecc 30d")
    assert kind == "ephemeral" and text.startswith("You are not allowed to silence")
    assert "<@UALICE>" in text
    assert rig.slash.calls == []  # type: ignore[union-attr]
    refused = [e for e in global_audit(redis) if e[1] == "incident.refused"]
    assert refused == [("UMALLORY", "incident.refused", {
        "verb": "silence", "host": "gpu-01", "kind": "gpu_ecc", "duration_s": 30 * 86400})]
    assert reply(rig, "UALICE", "silence gpu-01 gpu_ecc 30d")[0] == "silenced"
    assert rig.slash.calls == [  # type: ignore[union-attr]
        ("silence", "UALICE", "gpu-01", "gpu_ecc", 30 * 86400)]


def test_diag_by_a_non_approver_is_refused_privately_and_audited(rig: SlackRig,
                                                                redis: Redis) -> None:
    text, kind = reply(rig, "UMALLORY", "diag gpu-01 gpu_health")
    assert kind == "ephemeral"
    assert text.startswith("You are not allowed to run a diagnosis on gpu-01")
    assert "<@UALICE>" in text
    assert rig.slash.calls == []  # type: ignore[union-attr]
    refused = [e for e in global_audit(redis) if e[1] == "incident.refused"]
    assert refused == [("UMALLORY", "incident.refused", {
        "verb": "diag", "host": "gpu-01", "playbook": "gpu_health"})]
    assert reply(rig, "UALICE", "diag gpu-01")[0] == "diagnosing"
    assert rig.slash.calls == [("diag", "UALICE", "gpu-01", None)]  # type: ignore[union-attr]


def click_without_user(rig: SlackRig, action_id: str, value: str) -> None:
    assert rig.sender is not None
    payload = {"type": "block_actions", "team": {"id": "T0001"}, "api_app_id": "A0001",
               "container": {"type": "message", "message_ts": "1.2", "channel_id": "C0INCIDENT"},
               "channel": {"id": "C0INCIDENT"}, "trigger_id": "1.t",
               "actions": [{"type": "button", "action_id": action_id, "value": value,
                            "block_id": "b", "action_ts": "1"}]}
    answer = rig.sender.post(urlencode({"payload": json.dumps(payload)}))
    assert answer.status_code == 200, answer.text
    rig.drain()


def test_click_without_a_user_is_refused_and_audited_as_unknown_user(rig: SlackRig,
                                                                     redis: Redis) -> None:
    click_without_user(rig, "incident_ack", "INC-7")
    assert rig.slash.calls == []  # type: ignore[union-attr]
    assert rig.standin.calls_of("chat.postEphemeral") == []  # nobody to tell privately
    assert (strings.AUDIT_UNKNOWN_USER, "incident.refused", {"verb": "ack"}) in [
        (e.actor, e.action, e.detail) for e in AuditLog(redis).timeline("INC-7")]


def test_approve_without_a_user_is_refused_and_audited_as_unknown_user(rig: SlackRig,
                                                                       redis: Redis) -> None:
    store = ApprovalStore(redis)
    approval = store.create("42", ApprovalAction("systemd.stop_disable", {"unit": "vllm.service"},
                                                 "a1"), evidence_hash="e",
                            requested_by="alertmanager", now=time.time(),
                            policy=policy_from_settings(rig.settings))
    click_without_user(rig, "approve", approval.id)
    assert rig.approved == []
    again = store.get(approval.id)
    assert again is not None and again.status is ApprovalStatus.PENDING
    assert [(e.actor, e.action) for e in AuditLog(redis).timeline("42")] == [
        (strings.AUDIT_UNKNOWN_USER, "approval.refused")]
