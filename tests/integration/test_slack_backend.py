"""SlackBackend against the Web API stand-in: posts, coalesced edits, 429 and retries, uploads."""

from __future__ import annotations

import itertools
import time
from pathlib import Path

import pytest
from redis import Redis

from bot.chat.base import Button, ChatMessage, Ephemeral, MessageRef, Section
from bot.chat.interactions import audit_sink
from bot.chat.slack import (
    ChatDeliveryError,
    SlackBackend,
    SlackGroups,
    make_client,
    shared_backend,
)
from bot.rig.slack_standin import SlackStandIn
from storage.audit import AuditLog
from storage.stores import Stores
from tests.fixtures.slack import CHANNEL, slack_test_settings

MSG = ChatMessage(
    text="gpu-01: vram_idle",
    header="gpu-01",
    sections=(Section("finding", code="nvidia-smi"),),
    buttons=(Button("Approve", "approve", "abc"),),
    incident_id="42",
)


def backend(standin: SlackStandIn, **kw: object) -> tuple[SlackBackend, list[tuple[object, ...]]]:
    audit: list[tuple[object, ...]] = []
    client = make_client(slack_test_settings(standin))
    return SlackBackend(client, audit=lambda *e: audit.append(e), **kw), audit  # type: ignore[arg-type]


def texts(standin: SlackStandIn, method: str) -> list[str]:
    return [str(c.params.get("text")) for c in standin.calls_of(method)]


def test_post_thread_ephemeral_and_fetch(slack_standin: SlackStandIn) -> None:
    chat, _ = backend(slack_standin)
    ref = chat.post(CHANNEL, MSG)
    (call,) = slack_standin.calls_of("chat.postMessage")
    assert call.token == "xoxb-0000-test" and call.params["channel"] == CHANNEL
    assert (
        call.params["blocks"][0]["type"] == "header" and call.params["text"] == "gpu-01: vram_idle"
    )
    reply = chat.post(CHANNEL, ChatMessage(text="step 1 done"), thread=ref)
    assert (
        slack_standin.calls_of("chat.postMessage")[1].params["thread_ts"] == ref.ts
        and reply.ts != ref.ts
    )
    chat.ephemeral(Ephemeral(user="U1", text="only you", channel=CHANNEL))
    assert slack_standin.calls_of("chat.postEphemeral")[0].params == {
        "channel": CHANNEL,
        "user": "U1",
        "text": "only you",
    }
    fetched = chat.fetch_message(ref)
    assert fetched is not None and fetched["blocks"][0]["type"] == "header"
    chat.close()


def test_updates_are_coalesced_per_message_latest_wins(slack_standin: SlackStandIn) -> None:
    chat, _ = backend(slack_standin, update_interval_s=2.0)
    ref, other = chat.post(CHANNEL, MSG), chat.post(CHANNEL, MSG)
    for i in range(10):
        chat.update(ref, ChatMessage(text=f"progress {i}"))
        time.sleep(0.05)
    chat.update(other, ChatMessage(text="other 1"))  # another message is not held back
    assert chat.flush(10)
    calls = slack_standin.calls_of("chat.update")
    mine = [c for c in calls if c.params["ts"] == ref.ts]
    assert [c.params["text"] for c in mine] == ["progress 0", "progress 9"]
    assert mine[1].at - mine[0].at >= 1.95, "at most one chat.update per 2 s per message"
    assert [c.params["text"] for c in calls if c.params["ts"] == other.ts] == ["other 1"]
    assert slack_standin.messages[(CHANNEL, ref.ts)]["text"] == "progress 9"
    chat.close()


def test_429_retry_after_is_honoured(slack_standin: SlackStandIn) -> None:
    chat, audit = backend(slack_standin)
    slack_standin.rate_limit("chat.postMessage", times=1, retry_after=1)
    chat.post(CHANNEL, MSG)
    first, second = slack_standin.calls_of("chat.postMessage")
    assert second.at - first.at >= 0.95 and audit == []
    chat.close()


def test_server_errors_are_retried_with_backoff(slack_standin: SlackStandIn) -> None:
    """slack_sdk's handlers: 0.5 s then 1 s, each with up to as much again of jitter."""
    chat, audit = backend(slack_standin)
    slack_standin.fail("chat.postMessage", times=2, status=503, error="service_unavailable")
    chat.post(CHANNEL, MSG)
    calls = slack_standin.calls_of("chat.postMessage")
    assert len(calls) == 3 and audit == []
    gaps = [b.at - a.at for a, b in itertools.pairwise(calls)]
    assert 0.45 <= gaps[0] <= 2.5 and 0.95 <= gaps[1] <= 3.5
    chat.close()


def test_slacks_own_transient_codes_and_a_502_are_retried(slack_standin: SlackStandIn) -> None:
    chat, audit = backend(slack_standin)
    slack_standin.fail("chat.postEphemeral", times=1, status=502, error="bad_gateway")
    chat.ephemeral(Ephemeral(user="U1", text="only you", channel=CHANNEL))
    assert len(slack_standin.calls_of("chat.postEphemeral")) == 2 and audit == []
    chat.close()


def test_the_outbox_path_never_retries_nor_sleeps(slack_standin: SlackStandIn) -> None:
    """post_once: one attempt; a 429 comes back at once with Slack's Retry-After for the
    outbox to set the item's due time (it must not sleep on the loop's thread)."""
    from bot.chat.base import ChatSendError

    chat, _ = backend(slack_standin)
    slack_standin.rate_limit("chat.postMessage", times=1, retry_after=30)
    t0 = time.monotonic()
    with pytest.raises(ChatSendError) as err:
        chat.post_once(CHANNEL, MSG, None, "k1")
    assert time.monotonic() - t0 < 5 and err.value.retry_after_s == 30
    assert len(slack_standin.calls_of("chat.postMessage")) == 1
    slack_standin.fail("chat.postMessage", times=1, status=503, error="service_unavailable")
    with pytest.raises(ChatSendError) as err:
        chat.post_once(CHANNEL, MSG, None, "k2")
    assert err.value.transient and len(slack_standin.calls_of("chat.postMessage")) == 2
    chat.close()


def test_final_failure_is_logged_and_audited(
    slack_standin: SlackStandIn, caplog: pytest.LogCaptureFixture
) -> None:
    chat, audit = backend(slack_standin)
    slack_standin.fail("chat.postMessage", times=10, status=500)
    with pytest.raises(ChatDeliveryError, match=r"chat\.postMessage failed after 4 attempt"):
        chat.post(CHANNEL, MSG)
    detail = {"method": "chat.postMessage", "attempts": 4, "error": "internal_error"}
    assert audit == [("42", "bot", "chat.delivery_failed", detail)]
    assert "slack delivery failed" in caplog.text
    chat.close()


def test_background_update_failure_is_audited_not_dropped_silently(
    slack_standin: SlackStandIn,
) -> None:
    chat, audit = backend(slack_standin, update_interval_s=0.1)
    chat.update(
        MessageRef(CHANNEL, "999.000001"), ChatMessage(text="x", incident_id="7")
    )  # no such message
    assert chat.flush(5)
    detail = {"method": "chat.update", "attempts": 1, "error": "message_not_found"}
    assert audit == [("7", "bot", "chat.delivery_failed", detail)]
    chat.close()


def test_client_errors_are_not_retried(slack_standin: SlackStandIn) -> None:
    chat, audit = backend(slack_standin)
    client = make_client(slack_test_settings(slack_standin))
    client.token = "xoxb-wrong"
    wrong = SlackBackend(client, audit=lambda *e: audit.append(e))
    with pytest.raises(ChatDeliveryError, match="invalid_auth"):
        wrong.post(CHANNEL, MSG)
    assert len(slack_standin.calls_of("chat.postMessage")) == 1
    wrong.close()
    chat.close()


def test_upload_goes_to_the_thread(slack_standin: SlackStandIn, tmp_path: Path) -> None:
    chat, _ = backend(slack_standin)
    ref = chat.post(CHANNEL, MSG)
    chart = tmp_path / "digest.png"
    chart.write_bytes(b"\x89PNG" + b"0" * 100)
    chat.upload(ref, chart, "GPU digest")
    (url_call,) = slack_standin.calls_of("files.getUploadURLExternal")
    assert url_call.params["filename"] == "digest.png" and int(url_call.params["length"]) == 104
    (upload,) = slack_standin.calls_of("upload")
    assert slack_standin.uploads[upload.params["file_id"]] == chart.read_bytes()
    (done,) = slack_standin.calls_of("files.completeUploadExternal")
    assert done.params["channel_id"] == CHANNEL and done.params["thread_ts"] == ref.ts
    assert "GPU digest" in str(done.params["files"])
    chat.close()


def test_usergroups_are_cached(slack_standin: SlackStandIn) -> None:
    groups = SlackGroups(make_client(slack_test_settings(slack_standin)))
    assert groups.groups_of("UBOB", frozenset({"S0ONCALL", "S0EMPTY"})) == {"S0ONCALL"}
    assert groups.groups_of("UALICE", frozenset({"S0ONCALL"})) == frozenset()
    assert len(slack_standin.calls_of("usergroups.users.list")) == 2  # one per group, then cached


def test_the_shared_budget_spaces_edits_across_replicas(slack_standin: SlackStandIn,
                                                        redis: Redis) -> None:
    one = shared_backend(make_client(slack_test_settings(slack_standin)), Stores(redis, redis),
                         update_interval_s=0.6)
    two = shared_backend(make_client(slack_test_settings(slack_standin)), Stores(redis, redis),
                         update_interval_s=0.6)
    ref = one.post(CHANNEL, MSG)
    one.update(ref, ChatMessage(text="from one"))
    time.sleep(0.05)
    two.update(ref, ChatMessage(text="from two"))
    assert one.flush(5) and two.flush(5)
    first, second = slack_standin.calls_of("chat.update")
    assert (first.params["text"], second.params["text"]) == ("from one", "from two")
    assert second.at - first.at >= 0.55
    one.close()
    two.close()


def test_failures_land_in_the_real_audit_log(
    slack_standin: SlackStandIn, redis: Redis, tmp_path: Path
) -> None:
    log = AuditLog(redis)
    chat = SlackBackend(
        make_client(slack_test_settings(slack_standin)), audit=audit_sink(log)
    )
    slack_standin.fail("chat.postMessage", times=4)
    with pytest.raises(ChatDeliveryError):
        chat.post(CHANNEL, MSG)
    (entry,) = log.timeline("42")
    assert (entry.actor, entry.action, entry.detail["attempts"]) == (
        "bot",
        "chat.delivery_failed",
        4,
    )
    slack_standin.fail("files.getUploadURLExternal", times=1, status=400, error="invalid_arguments")
    chart = tmp_path / "c.png"
    chart.write_bytes(b"x")
    with pytest.raises(ChatDeliveryError):
        chat.upload(MessageRef(CHANNEL, "1.1"), chart, "chart")
    assert [e.action for e in log.recent()] == ["chat.delivery_failed", "chat.delivery_failed"]
    chat.close()
