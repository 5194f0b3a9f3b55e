"""The GPU health gate in front of every resume, through the flow: a broken GPU (Xid 79)
blocks the approved resume and offers a two-person override; on the seed story the gate
passes once the idle server is stopped and the chained resume runs.

Real: redis-server, the sim hosts over OpenSSH sshd, the extraction queue. Terminal chat.
"""

from __future__ import annotations

import io
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from redis import Redis
from rich.console import Console

from bot.chat.terminal import TerminalBackend
from bot.config.settings import Settings
from bot.demo.story import crashed_job, make_desk
from bot.domain.approval import ClaimOutcome
from bot.domain.incident import Alert
from bot.domain.lifecycle import IncidentState
from bot.extract.demo_data import prepare_interrupted_run
from bot.flow.assembly import Flow, build_flow
from bot.sim.sshd import SimHost
from bot.ssh.pool import ParamikoPool
from storage.stores import open_stores
from tests.fixtures.bots import audit_rows, settle
from tests.fixtures.remediation import gpu_used

S = IncidentState
ONCALL, SECOND = "UONCALL", "USECOND"
FAST_DIAG = {"samples": 2, "sample_interval_s": 0.1, "command_timeout_s": 4.0}
MakeFlow = Callable[..., tuple[Flow, SimHost, io.StringIO]]


@pytest.fixture
def make_flow(redis: Redis, redis_url: str,
              sim_factory: Callable[..., SimHost]) -> Iterator[MakeFlow]:
    pools: list[ParamikoPool] = []

    def build(scenario: str, host: str, **remediation: Any) -> tuple[Flow, SimHost,
                                                                      io.StringIO]:
        sim = sim_factory(scenario)
        settings = Settings.model_validate({
            "redis_url": redis_url, "chat_backend": "terminal",
            "hosts": {host: {"ssh": sim.target, "key": str(sim.key_path),
                             "known_hosts": str(sim.known_hosts_path), "gpus": 8}},
            "slack": {"approvers": [ONCALL, SECOND]},
            "extra": {"remediation": {"settle_s": 0.3, **remediation},
                      "diagnostics": FAST_DIAG}})
        out = io.StringIO()
        pool = ParamikoPool(settings.ssh_defaults)
        pools.append(pool)
        return build_flow(settings, open_stores(settings.redis_url), pool,
                          TerminalBackend(Console(file=out, width=200))), \
            sim, out

    yield build
    for pool in pools:
        pool.close()


def open_incident(ctx: Flow, host: str, kind: str) -> str:
    incident, created = ctx.incidents.open_or_fold(Alert(source="test", host=host, kind=kind))
    assert created
    ctx.diagnose.on_opened(incident.id)
    return str(incident.id)


def plan_of(ctx: Flow, incident_id: str, kind: str) -> dict[str, Any]:
    plans = ctx.incidents.require(incident_id).parts_to_dict()["plans"]
    return next(p for p in plans if p["action"]["kind"] == kind)


def test_broken_gpu_blocks_the_resume_until_two_people_override(
        make_flow: MakeFlow, redis_url: str, tmp_path: Path) -> None:
    ctx, _, out = make_flow("gpu_xid79", "gpu-04")
    job = crashed_job(redis_url, prepare_interrupted_run(tmp_path / "x", samples=24),
                      host="gpu-04")
    incident_id = open_incident(ctx, "gpu-04", "vm_restart")
    assert ctx.incidents.require(incident_id).state is S.AWAITING_APPROVAL
    resume = plan_of(ctx, incident_id, "extraction.resume")
    assert resume["action"]["params"] == {"job": job}
    desk = make_desk(ctx)
    assert desk.approve(resume["approval_id"], ONCALL).acted
    settle(ctx)  # the click event, handled by the flow's consumer

    incident = ctx.incidents.require(incident_id)
    assert incident.state is S.ACTION_FAILED
    assert ctx.jobs.status(job).state.value == "interrupted"  # blocked
    said = out.getvalue()
    assert "Health gate failed on gpu-04" in said and "The resume is blocked" in said
    assert incident.last_outcome is not None
    assert "critical Xid since boot on 0000:5d:00" in incident.last_outcome.summary
    steps = audit_rows(ctx, incident_id)
    assert [a for _, a, _ in steps if a.startswith("action.")] == []  # nothing ran
    assert any(a == "gate.failed" and not d["passed"] for _, a, d in steps)

    override = plan_of(ctx, incident_id, "extraction.resume_override")
    assert override["action"]["params"] == {"job": job}
    assert ctx.approvals.get(override["approval_id"]).required == 2
    first = desk.approve(override["approval_id"], ONCALL)
    assert first.outcome is ClaimOutcome.NEED_SECOND_APPROVER and not first.acted
    assert settle(ctx) == 0  # half approved: nothing for the flow yet
    assert ctx.jobs.status(job).state.value == "interrupted"
    assert desk.approve(override["approval_id"], SECOND).acted
    settle(ctx)

    assert ctx.jobs.status(job).state.value == "queued"
    incident = ctx.incidents.require(incident_id)
    assert incident.state is S.RESUMED and incident.parts_to_dict()["job"] == job
    steps = audit_rows(ctx, incident_id)
    forced = next(d for _, a, d in steps if a == "gate.override")
    assert forced["job"] == job and "critical Xid since boot on 0000:5d:00" in forced["reasons"]
    started = next(d for _, a, d in steps if a == "action.started")
    assert started["kind"] == "extraction.resume_override"
    assert "Health gate overridden by UONCALL, USECOND" in out.getvalue()


def test_seed_story_gate_passes_after_the_stop_and_the_chained_resume_runs(
        make_flow: MakeFlow, redis_url: str, tmp_path: Path) -> None:
    ctx, sim, out = make_flow("seed", "gpu-01", chain_resume=True, gate_need_mib=60 * 1024)
    job = crashed_job(redis_url, prepare_interrupted_run(tmp_path / "x", samples=24),
                      host="gpu-01")
    incident_id = open_incident(ctx, "gpu-01", "vram_idle")
    stop = plan_of(ctx, incident_id, "systemd.stop_disable")
    assert make_desk(ctx).approve(stop["approval_id"], ONCALL).acted
    settle(ctx)

    incident = ctx.incidents.require(incident_id)
    assert incident.state is S.RESUMED, incident.parts_to_dict().get("results")
    assert ctx.jobs.status(job).state.value == "queued"
    assert incident.gate is not None
    assert incident.gate.passed and incident.gate.checks["free memory"]
    assert "Health gate passed on gpu-01: gpu count, nvidia-smi" in out.getvalue()
    order = [a for _, a, _ in audit_rows(ctx, incident_id)
             if a in ("action.succeeded", "gate.passed", "action.started")]
    assert order == ["action.started", "action.succeeded", "gate.passed", "action.started",
                     "action.succeeded"]  # stop, its verification, the gate, then the resume
    assert max(gpu_used(sim)) == 0
