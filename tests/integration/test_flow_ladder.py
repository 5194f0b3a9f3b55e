"""Issue 17 through the assembled bot: after each result the incident message offers what
comes next as its own approval (a refusal's alternative, the ladder's next rung, the
lasting fix), read back from the Slack stand-in, and nothing runs before its own click.

Real: redis-server, the sim host over OpenSSH sshd, our service on uvicorn. Stand-in:
Slack's Web API. The playbook never proposes a signal for a unit's process (it proposes
the unit), so the first step here is offered the way every follow-up is (``plans.offer``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from bot.domain.approval import Approval
from bot.domain.findings import ProposedAction
from bot.domain.lifecycle import IncidentState
from bot.sim import sandbox
from bot.sim.sshd import SimHost
from tests.fixtures.bots import (  # noqa: F401 - ``loop`` is a fixture
    ONCALL,
    UNIT,
    Loop,
    loop,
    loop_settings,
    wait_until,
)
from tests.fixtures.remediation import gpu_used, tool_calls

S = IncidentState
SimFactory = Callable[..., SimHost]
REM = {"settle_s": 0.3, "poll_interval_s": 0.2, "verify_timeout_s": 3.0,
       "restart_margin_s": 1.0}


def offer_first(lp: Loop, incident_id: str, kind: str, params: dict[str, str]) -> str:
    """An operator's first step, offered like any follow-up; the message re-rendered."""
    target = lp.flow.hosts.target_for("gpu-01")
    plan = lp.flow.plans.offer(incident_id, ProposedAction(f"first-{kind}", kind, params,
                                                     "asked for in the thread", "-"), target)
    lp.flow.publisher.publish(incident_id)
    return plan.approval_id


def approve(lp: Loop, incident_id: str, approval_id: str) -> None:
    """Click Approve on the message as the stand-in holds it (fails if the button is absent)."""
    shown = lp.wait_text(incident_id, approval_id)
    lp.click(ONCALL, shown, lambda el: el.get("value") == approval_id
             and str(el["action_id"]).startswith("approve"))


def offered(lp: Loop, incident_id: str, kind: str) -> Approval:
    """The one pending approval of ``kind``, with its Approve button on the stored message."""
    found = wait_until(lambda: [a for a in lp.flow.approvals.for_incident(incident_id)
                                if a.kind == kind and a.is_open], 30, f"a pending {kind}")
    assert len(found) == 1, found
    shown = lp.wait_text(incident_id, found[0].id)
    assert any(el.get("value") == found[0].id and el["text"]["text"] == "Approve"
               for b in shown["blocks"] if b.get("type") == "actions" for el in b["elements"])
    return found[0]  # type: ignore[no-any-return]


def result_of(lp: Loop, incident_id: str, kind: str, timeout_s: float = 60) -> dict[str, Any]:
    """The result of ``kind`` once the action and what follows it (a repair's health gate)
    have finished: the newest one the audit trail recorded, the incident not running."""
    def done() -> dict[str, Any] | None:
        if lp.flow.incidents.require(incident_id).running is not None:
            return None
        found = [e.detail for e in lp.flow.audit.timeline(incident_id)
                 if e.action.startswith("action.") and e.action != "action.started"
                 and e.detail.get("kind") == kind and "outcome" in e.detail]
        gated = kind != "gpu.reset" or any(e.action.startswith("gate.")
                                           for e in lp.flow.audit.timeline(incident_id))
        return found[-1] if found and gated else None
    return wait_until(done, timeout_s, f"the result of {kind}")  # type: ignore[no-any-return]


def started(lp: Loop, incident_id: str) -> list[tuple[str, str]]:
    return [(e.actor, e.detail.get("kind", "")) for e in lp.flow.audit
            .timeline(incident_id) if e.action == "action.started"]


def test_a_refused_terminate_offers_stop_disable_which_holds_then_the_dropin(
        loop: Loop, redis_url: str, sim_factory: SimFactory) -> None:  # noqa: F811
    sim = sim_factory("respawn_10s")
    loop.start(loop_settings(redis_url, sim, loop.standin, {"remediation": REM}))
    incident_id = loop.open()
    loop.wait_state(incident_id, S.AWAITING_APPROVAL)
    approve(loop, incident_id, offer_first(loop, incident_id, "process.terminate", {"pid": "440"}))
    refused = result_of(loop, incident_id, "process.terminate")
    assert refused["outcome"] == "refused" and loop.state(incident_id) is S.ACTION_FAILED
    loop.wait_text(incident_id, f"runs under {UNIT} (Restart=always)")
    assert tool_calls(sim, "kill") == [] and min(gpu_used(sim)) >= 77_000

    stop = offered(loop, incident_id, "systemd.stop_disable")
    assert stop.action.params == {"unit": UNIT}
    approve(loop, incident_id, stop.id)
    done = result_of(loop, incident_id, "systemd.stop_disable", timeout_s=90)
    assert done["outcome"] == "succeeded", done["summary"]
    ev = done["verification"]["evidence"]
    assert ev["restart_window_s"] == 11.0 and ev["checked_after_s"] >= 11.0
    assert loop.state(incident_id) is S.VERIFIED and max(gpu_used(sim)) == 0
    loop.wait_text(incident_id, "8/8 GPUs free")

    dropin = offered(loop, incident_id, "systemd.dropin")
    assert dropin.action.params["unit"] == UNIT
    assert "Restart=always" in dropin.action.reason
    revert_plan = loop.flow.incidents.require(incident_id).revert_plan
    assert revert_plan is not None and revert_plan.action.kind == "systemd.revert"
    assert [k for _, k in started(loop, incident_id)] == ["process.terminate",
                                                         "systemd.stop_disable"]
    if not sandbox.available():  # the drop-in is a real file in the sim's sandbox root
        return
    first_revert = revert_plan.approval_id
    approve(loop, incident_id, dropin.id)
    applied = result_of(loop, incident_id, "systemd.dropin")
    assert applied["outcome"] == "succeeded", applied["summary"]
    meta = loop.flow.incidents.require(incident_id).parts_to_dict()
    assert meta["revert_plan"]["action"]["kind"] == "systemd.dropin_revert"
    assert first_revert in [p["approval_id"] for p in meta["plans"]]  # still offered
    loop.wait_text(incident_id, first_revert)


def test_the_ladder_sigterm_then_sigkill_then_gpu_reset_each_behind_its_own_click(
        loop: Loop, redis_url: str, sim_factory: SimFactory) -> None:  # noqa: F811
    sim = sim_factory("ladder")
    loop.start(loop_settings(redis_url, sim, loop.standin, {"remediation": REM}))
    incident_id = loop.open()
    loop.wait_state(incident_id, S.AWAITING_APPROVAL)
    approve(loop, incident_id, offer_first(loop, incident_id, "process.sigterm", {"pid": "777"}))
    first = result_of(loop, incident_id, "process.sigterm")
    assert first["outcome"] == "failed" and "PID 777 is still running" in first["summary"]

    kill = offered(loop, incident_id, "process.sigkill")
    assert kill.action.params["pid"] == "777"
    loop.drain()
    assert tool_calls(sim, "kill") == [["-TERM", "777"]]  # no SIGKILL before its own click
    approve(loop, incident_id, kill.id)
    second = result_of(loop, incident_id, "process.sigkill")
    assert second["outcome"] == "failed", second["summary"]  # gone, its memory still held
    assert tool_calls(sim, "kill") == [["-TERM", "777"], ["-KILL", "777"]]

    reset = offered(loop, incident_id, "gpu.reset")
    assert reset.action.params == {"gpu": "0", "release": ""}  # the daemons by unit name
    loop.drain()
    assert tool_calls(sim, "nvidia-smi", "--gpu-reset") == []
    approve(loop, incident_id, reset.id)
    third = result_of(loop, incident_id, "gpu.reset")
    assert third["outcome"] == "succeeded", third["summary"]
    assert tool_calls(sim, "nvidia-smi", "--gpu-reset") == [["--gpu-reset", "-i", "0"]]
    assert gpu_used(sim)[0] == 0
    # GPU 0 is free, but GPUs 1 and 2 still hold memory with no process: the health gate
    # keeps the host out of service, so the incident is not fixed (issue 36)
    loop.wait_state(incident_id, S.ACTION_FAILED)
    kept = loop.flow.incidents.require(incident_id).last_outcome
    assert kept is not None and "is not back in service" in kept.summary
    assert "GPU 1 is wedged" in kept.summary and "GPU 2 is wedged" in kept.summary
    assert [k for _, k in started(loop, incident_id)] == [
        "process.sigterm", "process.sigkill", "gpu.reset"]
    assert not [a for a in loop.flow.approvals.for_incident(incident_id)
                if a.is_open and a.kind == "host.reboot"]
