"""Paging's pure parts: settings validation, the Events v2 body, backoff, the trigger rule,
the stand-in's contract checks and the client's reading of an answer."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.config.settings import load_settings
from bot.core.errors import ConfigError
from bot.domain.paging import (
    PageAction,
    PageItem,
    PagePayload,
    PagingPolicy,
    backoff_s,
    events_v2_body,
    retry_after_s,
    should_trigger,
)
from bot.paging.client import SendOutcome, classify
from bot.rig.pagerduty_standin import problems

KEY = "k" * 32


@pytest.mark.parametrize(("yaml", "key", "reason"), [
    ("paging: {pagerduty: {after_s: -1}}", "paging.pagerduty.after_s", "greater than or equal"),
    ("paging: {pagerduty: {url: 'ftp://pd'}}", "paging.pagerduty.url", "http(s) URL"),
    ("paging: {pagerduty: {severities: [page]}}", "paging.pagerduty.severities",
     "unknown severity 'page'"),
    ("paging: {pagerduty: {routing_key_env: 'pd key'}}", "paging.pagerduty.routing_key_env",
     "environment variable name"),
    ("paging: {pagerduty: {routing_key: abc}}", "paging.pagerduty.routing_key", "xtra"),
])
def test_a_bad_paging_value_stops_start_with_the_key_and_reason(
        tmp_path: Path, yaml: str, key: str, reason: str) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(yaml + "\n")
    with pytest.raises(ConfigError, match=f"key '{key}'") as err:
        load_settings(path)
    assert reason in str(err.value)


def test_paging_settings_and_their_policy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("paging: {pagerduty: {routing_key_env: PD_KEY, after_s: 0, "
                    "severities: [critical, warning]}}\n")
    pd = load_settings(path).paging.pagerduty
    assert pd is not None and pd.routing_key() is None
    monkeypatch.setenv("PD_KEY", KEY)
    assert pd.routing_key() == KEY
    assert pd.policy() == PagingPolicy(after_s=0, severities=("critical", "warning"))
    assert load_settings(None).paging.pagerduty is None  # no section: no paging


def _trigger(summary: str = "INC-3 gpu-01: 8 GPUs hold VRAM", severity: str = "critical"
             ) -> PageItem:
    return PageItem("i1", "INC-3", PageAction.TRIGGER, 1.0,
                    PagePayload(summary, "gpu-01", severity, {"findings": ["x"]}))


def test_the_events_v2_bodies_pass_the_contract() -> None:
    trigger = events_v2_body(_trigger(), KEY)
    assert trigger == {"routing_key": KEY, "event_action": "trigger", "dedup_key": "INC-3",
                       "payload": {"summary": "INC-3 gpu-01: 8 GPUs hold VRAM",
                                   "source": "gpu-01", "severity": "critical",
                                   "custom_details": {"findings": ["x"]}}}
    ack = events_v2_body(PageItem("i2", "INC-3", PageAction.ACKNOWLEDGE, 2.0), KEY)
    assert ack == {"routing_key": KEY, "event_action": "acknowledge", "dedup_key": "INC-3"}
    long = events_v2_body(_trigger("x" * 5000, "bogus"), KEY)
    assert len(long["payload"]["summary"]) == 1024 and long["payload"]["severity"] == "warning"
    assert problems(trigger) == problems(ack) == problems(long) == []


def test_the_standin_rejects_what_pagerduty_rejects() -> None:
    assert problems(None) == ["Event object is invalid"]
    assert any("routing_key" in p for p in problems({"routing_key": "short",
                                                     "event_action": "resolve",
                                                     "dedup_key": "INC-1"}))
    assert any("dedup_key" in p for p in problems({"routing_key": KEY,
                                                   "event_action": "resolve"}))
    assert any("payload" in p for p in problems({"routing_key": KEY,
                                                 "event_action": "trigger"}))


def test_items_round_trip_and_count_their_failures() -> None:
    item = _trigger()
    assert PageItem.from_json(item.to_json()) == item
    failed = item.failed("HTTP 500").failed("ConnectError")
    assert (failed.attempts, failed.last_error, failed.id) == (2, "ConnectError", "i1")


def test_backoff_doubles_to_a_cap_and_retry_after_wins() -> None:
    assert [backoff_s(n) for n in (1, 2, 3, 4)] == [2, 4, 8, 16]
    assert backoff_s(30) == 300
    assert retry_after_s("30", 1) == 30 and retry_after_s("0", 5) == 0
    assert retry_after_s(None, 3) == 8 and retry_after_s("soon", 1) == 2
    assert retry_after_s("99999", 1) == 300


def test_the_trigger_rule() -> None:
    policy = PagingPolicy(after_s=600, severities=("critical",))
    assert should_trigger(policy, "critical", 0, 600, False, "")
    assert not should_trigger(policy, "critical", 0, 599, False, "")
    assert not should_trigger(policy, "warning", 0, 900, False, "")
    assert not should_trigger(policy, "critical", 0, 900, True, "")  # a person is on it
    assert not should_trigger(policy, "critical", 0, 900, False, "trigger")  # paged already
    assert not should_trigger(policy, "critical", 0, 900, False, "acked")
    assert should_trigger(PagingPolicy(after_s=0), "critical", 5, 5, False, "")


@pytest.mark.parametrize(("status", "outcome"), [
    (202, SendOutcome.SENT), (429, SendOutcome.RETRY), (500, SendOutcome.RETRY),
    (503, SendOutcome.RETRY), (400, SendOutcome.REJECTED), (404, SendOutcome.REJECTED)])
def test_the_client_reads_each_answer(status: int, outcome: SendOutcome) -> None:
    result = classify(status, "7", "body")
    assert result.outcome is outcome
    assert result.retry_after == ("7" if status == 429 else None)


def test_build_paging_needs_the_routing_key_in_the_environment(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from bot.paging.runner import build_paging

    path = tmp_path / "c.yaml"
    path.write_text("paging: {pagerduty: {routing_key_env: PD_TEST_KEY}}\n")
    settings = load_settings(path)
    monkeypatch.delenv("PD_TEST_KEY", raising=False)
    with pytest.raises(ConfigError, match="PD_TEST_KEY is not set"):
        build_paging(settings, None)  # type: ignore[arg-type]
    assert build_paging(load_settings(None), None) is None  # type: ignore[arg-type]


# --- issue 28: the fleet circuit breaker pages -------------------------------------------
def test_a_breaker_trip_is_one_critical_page_named_for_its_trip() -> None:
    from bot.paging.service import breaker_item, is_breaker_key

    event = {"type": "policy.breaker_tripped", "incident_id": "", "policy": "p", "host": "gpu-9",
             "hosts": "gpu-1,gpu-2", "cap": "2", "window_s": "3600.0", "at": "1784376000"}
    item = breaker_item(event, 5.0)
    assert item.dedup_key == "policy-breaker-1784376000" and is_breaker_key(item.dedup_key)
    assert item.action is PageAction.TRIGGER and item.payload is not None
    assert item.payload.severity == "critical" and item.payload.source == "incident-bot"
    assert "tripped by gpu-9 under policy p: 2 hosts acted on automatically in the last hour " \
           "reached the cap of 2" in item.payload.summary
    assert item.payload.custom_details["hosts"] == ["gpu-1", "gpu-2"]
    assert problems(events_v2_body(item, KEY)) == []
    assert breaker_item({**event, "at": ""}, 7.9).dedup_key == "policy-breaker-7"
    assert not is_breaker_key("INC-4") and not is_breaker_key("policy-breaker")
