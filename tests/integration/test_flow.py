"""The flow's decisions against a real sim host and Redis, through the terminal backend."""

from __future__ import annotations

import io
import subprocess
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from redis import Redis
from rich.console import Console

from bot.chat.terminal import TerminalBackend
from bot.config.settings import Settings
from bot.core import strings
from bot.demo.story import make_desk
from bot.domain.approval import ClaimOutcome
from bot.domain.incident import Alert, AlertStatus
from bot.domain.lifecycle import IncidentState
from bot.flow.assembly import Flow, build_flow
from bot.sim.sshd import SimHost
from bot.ssh.pool import ParamikoPool
from storage.stores import open_stores
from tests.fixtures.bots import settle, stops

ONCALL = "UONCALL"
UNIT = "vllm-kimi-k25-int4.service"


@pytest.fixture
def flow(redis: Redis, redis_url: str, sim_factory: Callable[..., SimHost]) -> Iterator[Any]:
    sim = sim_factory("seed")
    settings = Settings.model_validate({
        "redis_url": redis_url, "chat_backend": "terminal",
        "hosts": {"gpu-01": {"ssh": sim.target, "key": str(sim.key_path),
                             "known_hosts": str(sim.known_hosts_path)}},
        "slack": {"approvers": [ONCALL]},
        "extra": {"remediation": {"settle_s": 0.3}}})
    out = io.StringIO()
    pool = ParamikoPool(settings.ssh_defaults)
    ctx = build_flow(settings, open_stores(settings.redis_url), pool,
                     TerminalBackend(Console(file=out, width=120)))
    yield ctx, sim, out
    pool.close()


def open_incident(ctx: Flow) -> str:
    incident, created = ctx.incidents.open_or_fold(Alert(source="test", host="gpu-01",
                                                         kind="vram_idle"))
    assert created
    ctx.diagnose.on_opened(incident.id)
    return incident.id


def stop_approval(ctx: Flow, incident_id: str) -> str:
    plans = ctx.incidents.require(incident_id).parts_to_dict()["plans"]
    return next(p["approval_id"] for p in plans if p["action"]["kind"] == "systemd.stop_disable")


def test_finding_gone_before_the_click_means_no_action(flow: Any) -> None:
    ctx, sim, out = flow
    incident_id = open_incident(ctx)
    approval_id = stop_approval(ctx, incident_id)
    subprocess.run(sim.ssh_argv(f"systemctl stop {UNIT}"), check=True, timeout=30,
                   capture_output=True)  # someone fixed it by hand meanwhile
    decision = make_desk(ctx).approve(approval_id, ONCALL)
    assert decision.acted
    settle(ctx)  # the click event, handled by the flow's consumer
    assert stops(sim) == 1  # only the manual one
    assert ctx.incidents.require(incident_id).state is IncidentState.RESOLVED
    assert f"Not running stop {UNIT}" in out.getvalue()  # its words, never its kind
    actions = [e.action for e in ctx.audit.timeline(incident_id)]
    assert "action.skipped" in actions and "action.started" not in actions


def test_deny_records_the_reason_and_runs_nothing(flow: Any) -> None:
    ctx, sim, out = flow
    incident_id = open_incident(ctx)
    decision = make_desk(ctx).deny(stop_approval(ctx, incident_id), ONCALL, "training run")
    assert decision.acted
    settle(ctx)
    assert stops(sim) == 0
    assert ctx.incidents.require(incident_id).state is IncidentState.DENIED
    assert "training run" in out.getvalue()
    assert f"Denied by @{ONCALL}:" in out.getvalue()  # a mention (<@U…> in Slack)


def test_approve_twice_acts_once_and_offers_revert(flow: Any) -> None:
    ctx, sim, _ = flow
    incident_id = open_incident(ctx)
    desk = make_desk(ctx)
    approval_id = stop_approval(ctx, incident_id)
    first, second = desk.approve(approval_id, ONCALL), desk.approve(approval_id, ONCALL)
    assert first.acted and not second.acted
    assert settle(ctx) >= 1 and settle(ctx) == 0  # one click event; handled once
    assert stops(sim) == 1
    incident = ctx.incidents.require(incident_id)
    assert incident.state is IncidentState.VERIFIED
    assert incident.parts_to_dict()["last_outcome"]["outcome"] == "succeeded"
    assert incident.parts_to_dict()["revert_plan"]["action"]["kind"] == "systemd.revert"


def test_revert_button_restores_the_unit_after_verification(flow: Any) -> None:
    ctx, sim, _ = flow
    incident_id = open_incident(ctx)
    desk = make_desk(ctx)
    assert desk.approve(stop_approval(ctx, incident_id), ONCALL).acted
    settle(ctx)
    revert_id = ctx.incidents.require(incident_id).parts_to_dict()["revert_plan"]["approval_id"]
    assert desk.approve(revert_id, ONCALL).acted
    settle(ctx)
    unit = sim.state()["units"][UNIT]
    assert (unit["unit_file_state"], unit["active_state"]) == ("enabled", "active")
    incident = ctx.incidents.require(incident_id)
    assert incident.state is IncidentState.VERIFIED
    timeline = [(e.action, e.detail.get("to")) for e in ctx.audit.timeline(incident_id)]
    assert ("transition", "remediating") in timeline[timeline.index(("transition", "verified")):]
    assert incident.parts_to_dict()["last_outcome"]["kind"] == "systemd.revert"
    assert incident.parts_to_dict()["last_outcome"]["outcome"] == "succeeded"


def test_resume_is_offered_as_a_button_when_not_chained(flow: Any, tmp_path: Any,
                                                        redis_url: str) -> None:
    from bot.demo.story import crashed_job
    from bot.extract.demo_data import prepare_interrupted_run

    ctx, _, _ = flow
    job_id = crashed_job(redis_url, prepare_interrupted_run(tmp_path / "x", samples=24))
    incident_id = open_incident(ctx)
    desk = make_desk(ctx)
    assert desk.approve(stop_approval(ctx, incident_id), ONCALL).acted
    settle(ctx)
    plans = ctx.incidents.require(incident_id).parts_to_dict()["plans"]
    resume = next(p for p in plans if p["action"]["kind"] == "extraction.resume")
    assert resume["action"]["params"] == {"job": job_id}
    assert ctx.jobs.status(job_id).state.value == "interrupted"  # not yet
    assert desk.approve(resume["approval_id"], ONCALL).acted
    settle(ctx)
    assert ctx.jobs.status(job_id).state.value == "queued"
    incident = ctx.incidents.require(incident_id)
    assert incident.state is IncidentState.RESUMED and incident.parts_to_dict()["job"] == job_id


def test_a_click_on_a_resolved_incident_runs_nothing(flow: Any) -> None:
    ctx, sim, _out = flow
    incident_id = open_incident(ctx)
    approval_id = stop_approval(ctx, incident_id)
    ctx.incidents.transition(incident_id, IncidentState.RESOLVED, "alertmanager", "resolved")
    decision = make_desk(ctx).approve(approval_id, ONCALL)
    settle(ctx)
    assert stops(sim) == 0 and not decision.acted
    assert decision.text.endswith("UTC by the bot: nothing ran.")  # withdrawn with the resolve
    actions = [e.action for e in ctx.audit.timeline(incident_id)]
    assert "approval.cancelled" in actions and "approval.withdrawn_click" in actions
    assert "approval.approved" not in actions and "action.started" not in actions


def test_a_claim_that_wins_just_before_the_resolve_says_nothing_ran(flow: Any) -> None:
    """The click's claim wins, then the alert clears before the flow accepts it: the
    step runs nothing, and the flow tells the clicker why (privately, after the desk's
    "running now") and the thread."""
    ctx, sim, out = flow
    incident_id = open_incident(ctx)
    approval_id = stop_approval(ctx, incident_id)
    decision = make_desk(ctx).approve(approval_id, ONCALL)
    assert decision.outcome is ClaimOutcome.CLAIMED and "running now" in decision.text
    ctx.incidents.ingest([Alert(source="test", host="gpu-01", kind="vram_idle",
                                status=AlertStatus.RESOLVED)])  # before the consumer reads it
    settle(ctx)
    said = " ".join(out.getvalue().split())  # the console wraps long lines
    private = strings.TERMINAL_ONLY_YOU.format(user=f"@{ONCALL}")
    assert f"{private} Not running stop {UNIT}" in said  # to the clicker, privately
    in_thread = said.replace(f"{private} Not running stop {UNIT}", "")
    assert f"Not running stop {UNIT}" in in_thread  # and in the thread, for everyone
    assert f"incident {incident_id} is resolved" in said
    assert stops(sim) == 0
    actions = [e.action for e in ctx.audit.timeline(incident_id)]
    assert "action.skipped" in actions and "action.started" not in actions
