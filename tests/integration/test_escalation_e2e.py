"""Mentions end to end: a critical incident's message @mentions on-call; when nobody acts,
the escalation @mentions the next group (or on-call when there is none). Read back from
what the Slack stand-in received."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from redis import Redis

from bot.config.settings import Settings
from bot.domain.incident import Alert, Severity
from bot.rig.slack_standin import SlackStandIn
from bot.schedule.escalation import build_escalator
from bot.schedule.jobs import load_sections
from bot.schedule.wiring import message_ref_of
from bot.service import Service, build_service
from bot.sim.sshd import SimHost

TOKEN, CHANNEL = "xoxb-escalate", "C0INCIDENT"


@pytest.fixture
def make_bot(redis: Redis, redis_url: str,
             sim_factory: Callable[..., SimHost]) -> Iterator[Callable[..., Any]]:
    made: list[tuple[Service, SlackStandIn]] = []

    def make(slack: dict[str, Any], escalation: dict[str, Any]) -> tuple[Service, SlackStandIn]:
        sim = sim_factory("seed")
        standin = SlackStandIn(token=TOKEN).start()
        settings = Settings.model_validate({
            "redis_url": redis_url,
            "hosts": {"gpu-01": {"ssh": sim.target, "key": str(sim.key_path),
                                 "known_hosts": str(sim.known_hosts_path)}},
            "slack": {"channel": CHANNEL, "approvers": ["UALICE"], "api_url": standin.api_url,
                      "oncall": "S0ONCALL", **slack},
            "extra": {"scheduler": {"enabled": False}, "escalation": escalation},
            "slack_signing_secret": "s", "slack_bot_token": TOKEN})
        made.append((build_service(settings, with_scheduler=False), standin))
        return made[-1]

    yield make
    for service, standin in made:
        service.close()
        standin.stop()


def critical_incident_posted(service: Service, standin: SlackStandIn) -> tuple[str, Any]:
    incident, _ = service.flow.incidents.open_or_fold(
        Alert(source="test", host="gpu-01", kind="vram_idle", severity=Severity.CRITICAL))
    service.flow.diagnose.on_opened(incident.id)
    parent = next(c for c in standin.wait_for("chat.postMessage", 1, 30)
                  if not c.params.get("thread_ts"))
    return incident.id, parent


def escalate(service: Service) -> list[str]:
    settings = service.settings
    _, _, cfg = load_sections(settings.extra)
    escalator = build_escalator(settings, cfg, service.stores, service.flow.chat,
                                message_ref_of(service.flow.incidents))
    assert escalator is not None
    return escalator.run(now=time.time() + cfg.after_minutes * 60 + 1)


def blocks_text(call: Any) -> str:
    return " ".join(str(b.get("text", {}).get("text", "")) for b in call.params["blocks"])


def test_critical_mentions_oncall_and_escalation_mentions_the_next_group(
        make_bot: Callable[..., Any]) -> None:
    service, standin = make_bot({"escalation_channel": "C0ESCAL"}, {"usergroup": "S0NEXT"})
    incident_id, parent = critical_incident_posted(service, standin)
    assert str(parent.params["text"]).startswith("<!subteam^S0ONCALL> gpu-01")
    assert service.flow.incidents.require(incident_id).state.value == "awaiting_approval"

    assert escalate(service) == [incident_id]
    (sent,) = [c for c in standin.calls_of("chat.postMessage") if c.params["channel"] == "C0ESCAL"]
    assert str(sent.params["text"]).startswith("<!subteam^S0NEXT> ")
    assert "<!subteam^S0NEXT>" in blocks_text(sent), "the mention is in a block, so it pings"
    assert "S0ONCALL" not in str(sent.params), "escalation goes to the next group"
    assert escalate(service) == [], "once per incident"


def test_without_a_next_group_escalation_mentions_oncall_in_the_thread(
        make_bot: Callable[..., Any]) -> None:
    service, standin = make_bot({}, {})
    incident_id, _ = critical_incident_posted(service, standin)
    assert escalate(service) == [incident_id]
    (escalation,) = [c for c in standin.calls_of("chat.postMessage")
                     if "Critical incident" in str(c.params.get("text"))]
    thread = service.flow.incidents.require(incident_id).parts_to_dict()["chat"]["ts"]
    assert escalation.params["channel"] == CHANNEL and escalation.params["thread_ts"] == thread
    assert str(escalation.params["text"]).startswith("<!subteam^S0ONCALL> ")


def test_a_failed_fix_waits_for_a_person_again_until_someone_acks(redis: Redis) -> None:
    """From the stored audit trail: the approval before the failure does not count; an ack
    does."""
    from bot.domain.lifecycle import IncidentState as S
    from bot.schedule.escalation import StoreCandidates
    from storage.audit import AuditLog
    from storage.incidents import IncidentStore

    now = [1_764_000_000.0]
    store = IncidentStore(redis, clock=lambda: now[0])
    audit = AuditLog(redis, clock=lambda: now[0])
    incident, _ = store.open_or_fold(Alert(source="test", host="gpu-01", kind="vram_idle",
                                           severity=Severity.CRITICAL))
    source = StoreCandidates(store, audit)
    for state in (S.DIAGNOSING, S.AWAITING_APPROVAL):
        now[0] += 10
        store.transition(incident.id, state, "bot", "flow")
    audit.append(incident.id, "UALICE", "approval.approved", {"kind": "systemd.stop_disable"})
    (waiting,) = source.escalation_candidates()
    assert waiting.acted, "an approval answers an incident awaiting approval"
    for state in (S.APPROVED, S.REMEDIATING, S.ACTION_FAILED):
        now[0] += 10
        store.transition(incident.id, state, "bot", "flow")
    (failed,) = source.escalation_candidates()
    assert failed.state == "action_failed" and not failed.acted
    now[0] += 10
    audit.append(incident.id, "UBOB", "incident.ack", {})
    (acked,) = source.escalation_candidates()
    assert acked.acted
