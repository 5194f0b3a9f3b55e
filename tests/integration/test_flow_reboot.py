"""``host.reboot`` through the assembled bot on a sim host that can reboot (new boot id,
processes gone, units enabled at boot started again): announced in the thread, the host's
other incidents marked, and the incident re-diagnosed once the host answers with a new
boot id: verified when the finding is gone, action_failed naming what is still there.

Real: redis-server, the sim host over OpenSSH sshd (its sandbox holds the boot id file),
our service on uvicorn. Stand-in: Slack's Web API. The scheduler is off in these bots, so
the test calls the poll the expiry tick runs (``timers.expire_approvals``).
"""

from __future__ import annotations

import subprocess
import uuid
from collections.abc import Callable
from dataclasses import replace

import pytest

from bot.domain.findings import ProposedAction
from bot.domain.lifecycle import IncidentState
from bot.flow import reboot_step
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
from tests.fixtures.need import need
from tests.fixtures.remediation import gpu_used, tool_calls

S = IncidentState
SimFactory = Callable[..., SimHost]


@pytest.fixture
def sims(sim_factory: SimFactory) -> SimFactory:
    need(sandbox.available(), "the sim's boot id file lives in its sandbox (root and unshare)")
    return sim_factory


def boot_file(sim: SimHost) -> str:
    return subprocess.run(sim.ssh_argv("cat /proc/sys/kernel/random/boot_id"),
                          capture_output=True, text=True, timeout=30).stdout.strip()


def is_open(lp: Loop, approval_id: str) -> bool:
    approval = lp.flow.approvals.get(approval_id)
    assert approval is not None
    return bool(approval.is_open)


def reboot_approved(lp: Loop, incident_id: str) -> None:
    plan = lp.flow.followups.offer(incident_id, ProposedAction("reboot", "host.reboot", {},
                                                     "asked for in the thread", "-"),
                 lp.flow.hosts.target_for("gpu-01"))
    lp.flow.publisher.publish(incident_id)
    shown = lp.wait_text(incident_id, plan.approval_id)
    lp.click(ONCALL, shown, lambda el: el.get("value") == plan.approval_id
             and str(el["action_id"]).startswith("approve"))
    wait_until(lambda: (lp.flow.incidents.require(incident_id).reboot is not None
                        and lp.flow.incidents.require(incident_id).running is None),
               60, "the reboot request")


def test_a_reboot_is_announced_marks_the_hosts_incidents_and_sees_the_unit_come_back(
        loop: Loop, redis_url: str, sims: SimFactory) -> None:  # noqa: F811
    sim = sims("seed")
    before = boot_file(sim)
    assert str(uuid.UUID(before)) == before
    loop.start(loop_settings(redis_url, sim, loop.standin))
    incident_id = loop.open()
    loop.wait_state(incident_id, S.AWAITING_APPROVAL)
    other_id = loop.open("vm_restart")
    loop.wait_state(other_id, S.NO_ACTION, S.AWAITING_APPROVAL)
    loop.message(other_id)  # posted: it has a thread for the note
    old_plans = loop.flow.incidents.require(other_id).parts_to_dict()["plans"]
    reboot_approved(loop, incident_id)

    meta = loop.flow.incidents.require(incident_id).parts_to_dict()
    assert meta["reboot"]["boot_id"] == before and not meta["reboot"].get("done")
    assert loop.state(incident_id) is S.REMEDIATING  # not verified until the host is back
    assert tool_calls(sim, "systemctl", "reboot") == [["reboot"]]
    after = boot_file(sim)
    assert after != before
    loop.wait_posted("Reboot of gpu-01 requested")  # Slack's pace may send it from the outbox
    assert loop.flow.incidents.require(other_id).parts_to_dict()["host_reboot"]["by"] == incident_id
    loop.wait_posted(f"incident {incident_id}, approved by")

    assert loop.flow.reboots.poll_reboots() == [incident_id]
    assert loop.state(incident_id) is S.ACTION_FAILED  # the enabled unit took the GPUs again
    result = loop.flow.incidents.require(incident_id).parts_to_dict()["results"][-1]
    assert result["ok"] is False and f"new boot {after}" in result["text"]
    assert "still there" in result["text"] and UNIT in result["text"]
    assert min(gpu_used(sim)) >= 77_000
    assert loop.flow.reboots.poll_reboots() == []  # settled once
    loop.wait_text(incident_id, "still there")
    # the outbox may audit a late delivery after the settle: the flow's own last word counts
    actions = [e.action for e in loop.flow.audit.timeline(incident_id)
               if not e.action.startswith("chat.")]
    assert "host.reboot_requested" in actions and actions[-1] == "host.reboot_settled"

    # the other incident: re-diagnosed once, its problem (the unit back on the GPUs) still there
    other = loop.flow.incidents.require(other_id)
    mark = other.parts_to_dict()["host_reboot"]
    assert mark["settled"] and mark["boot_id_after"] == after
    assert [e.action for e in loop.flow.audit.timeline(other_id)].count(
        "host.reboot_followed") == 1
    assert other.state is S.AWAITING_APPROVAL
    fresh = {p["approval_id"] for p in other.parts_to_dict()["plans"]}
    for old in old_plans:  # the old buttons are withdrawn, new ones offered
        assert old["approval_id"] not in fresh
        assert not is_open(loop, old["approval_id"])
    loop.wait_posted("this problem is not gone")


def test_a_reboot_that_clears_a_wedged_host_is_verified(
        loop: Loop, redis_url: str, sims: SimFactory) -> None:  # noqa: F811
    sim = sims("ladder", overrides={"units": {"trainer.service": {"unit_file_state": "disabled"}}})
    before = boot_file(sim)
    loop.start(loop_settings(redis_url, sim, loop.standin))
    incident_id = loop.open()
    loop.wait_state(incident_id, S.AWAITING_APPROVAL)
    assert max(gpu_used(sim)) >= 30_000
    reboot_approved(loop, incident_id)
    assert loop.flow.reboots.poll_reboots() == [incident_id]
    assert loop.state(incident_id) is S.VERIFIED
    meta = loop.flow.incidents.require(incident_id).parts_to_dict()
    assert meta["reboot"]["boot_id_after"] not in (None, before)
    assert "the problem is gone" in meta["results"][-1]["text"]
    assert max(gpu_used(sim)) == 0


def test_a_host_that_does_not_come_back_fails_after_the_deadline(
        loop: Loop, redis_url: str, sims: SimFactory) -> None:  # noqa: F811
    sim = sims("seed")
    loop.start(loop_settings(redis_url, sim, loop.standin))
    incident_id = loop.open()
    loop.wait_state(incident_id, S.AWAITING_APPROVAL)
    reboot_approved(loop, incident_id)
    # the same boot id as before the request: the host has not rebooted (yet)
    same = boot_file(sim)
    loop.flow.incidents.update(incident_id, lambda i: replace(
        i, reboot=replace(i.reboot, boot_id=same) if i.reboot else None))
    assert loop.flow.reboots.poll_reboots() == []
    assert loop.state(incident_id) is S.REMEDIATING
    reboots = loop.flow.reboots
    real = reboots.clock
    reboots.clock = lambda: real() + reboot_step.BACK_WITHIN_S + 1
    assert loop.flow.reboots.poll_reboots() == [incident_id]
    assert loop.state(incident_id) is S.ACTION_FAILED
    assert "did not answer with a new boot id" in \
        loop.flow.incidents.require(incident_id).parts_to_dict()["results"][-1]["text"]


def test_after_the_reboot_the_hosts_other_incident_whose_problem_is_gone_is_resolved(
        loop: Loop, redis_url: str, sims: SimFactory) -> None:  # noqa: F811
    sim = sims("ladder", overrides={"units": {"trainer.service": {"unit_file_state": "disabled"}}})
    loop.start(loop_settings(redis_url, sim, loop.standin))
    incident_id = loop.open()
    loop.wait_state(incident_id, S.AWAITING_APPROVAL)
    other_id = loop.open("vm_restart")
    loop.wait_state(other_id, S.AWAITING_APPROVAL)
    loop.message(other_id)
    pending = [p.approval_id for p in loop.flow.incidents.require(other_id).plans]
    assert pending
    reboot_approved(loop, incident_id)
    assert loop.state(other_id) is S.AWAITING_APPROVAL  # marked, not moved until it is back
    assert loop.flow.incidents.require(other_id).parts_to_dict()["host_reboot"]["by"] == incident_id

    assert loop.flow.reboots.poll_reboots() == [incident_id]
    assert loop.state(incident_id) is S.VERIFIED
    assert loop.state(other_id) is S.RESOLVED
    other = loop.flow.incidents.require(other_id)
    assert other.parts_to_dict()["results"][-1]["text"].endswith("this problem is gone.")
    assert not any(is_open(loop, a) for a in pending)
    codes = [f["code"] for f in other.parts_to_dict()["diagnosis"]["findings"]]
    assert "gpu.idle_vram_held" not in codes and "gpu.free" in codes
    loop.wait_posted("this problem is gone")
