"""slurm.drain and slurm.resume over real SSH against a real slurmctld.

The simulated host (real sshd, private mount namespace) runs the real ``scontrol`` and
``squeue``: the munge socket's directory is bound into its sandbox and ``SLURM_CONF`` is
exported to its sessions. A real ``sbatch`` job runs on the node while it is drained.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import cast

import pytest

from bot.chat.base import ChatBackend, ChatMessage, MessageRef
from bot.remediation import ActionResult, Outcome, RemediationOptions, execute, revert_result
from bot.remediation.followup import gate_note, offers, return_to_slurm
from bot.remediation.slurm import DrainedCache, drained_nodes, overdue, read_status
from bot.schedule.drained_escalation import DrainedEscalator
from bot.schedule.escalation import Target
from bot.sim.sshd import SimHost
from bot.ssh.base import SSHTarget
from bot.ssh.pool import ParamikoPool
from playbooks import PlaybookOptions
from playbooks.health_gate import run_gate
from playbooks.parsers.slurm import reason_epoch
from storage.audit import AuditLog
from storage.claims import Claims
from storage.connection import Redis
from tests.fixtures.remediation import session_commands
from tests.fixtures.sim import SimFactory, one_host_config
from tests.fixtures.slurm import SlurmCluster

FINDING = "GPU 2 fell off the bus (Xid 79)"


@pytest.fixture
def node_host(sim_factory: SimFactory, slurm: SlurmCluster) -> SimHost:
    """A simulated GPU host whose sessions reach the real controller."""
    return sim_factory("healthy", binds=(slurm.socket_dir,),
                       env={"SLURM_CONF": str(slurm.conf)})


def drain(pool: ParamikoPool, target: SSHTarget, options: RemediationOptions,
          incident: str = "INC-7", audit: AuditLog | None = None) -> ActionResult:
    return execute(pool, target, "slurm.drain",
                   {"node": "gpu-01", "reason": FINDING, "incident": incident},
                   approver="U0AAAAAAA", evidence_hash=None, audit=audit, options=options,
                   incident_id=incident)


def resume(pool: ParamikoPool, target: SSHTarget, options: RemediationOptions) -> ActionResult:
    return execute(pool, target, "slurm.resume", {"node": "gpu-01"}, approver="U0AAAAAAA",
                   evidence_hash=None, audit=None, options=options, incident_id="INC-7")


def test_drain_around_a_running_job_then_resume(
        node_host: SimHost, slurm: SlurmCluster, rem_pool: ParamikoPool,
        fast_options: RemediationOptions, audit_log: AuditLog) -> None:
    job = slurm.sbatch("train-llm", minutes=90)
    target = node_host.ssh_target()

    result = drain(rem_pool, target, fast_options, audit=audit_log)
    assert result.outcome is Outcome.SUCCEEDED, result.summary
    assert slurm.state() == "ALLOCATED+DRAIN"  # what sinfo calls draining
    assert f"Reason=incident-bot INC-7: {FINDING} [root@" in slurm.show_node()
    assert "DRAINING" in result.summary
    assert re.search(rf"1 job\(s\) still run there: {job} \(root, train-llm, 1 h (29|30) min "
                     r"left\)", result.summary), result.summary
    assert result.captured is not None and result.captured.slurm is not None
    assert result.captured.slurm.node.state == "ALLOCATED"  # the state before
    assert [r.command for r in result.commands] == [
        f"scontrol update NodeName=gpu-01 State=DRAIN 'Reason=incident-bot INC-7: {FINDING}'"]
    assert sum("scontrol update" in c for c in session_commands(node_host)) == 1
    assert [e.action for e in audit_log.timeline("INC-7")][-1] == "action.succeeded"

    slurm.run("scancel", job)
    slurm.wait(lambda: slurm.state() == "IDLE+DRAIN", "DRAINED")
    seen = read_status(rem_pool, target, "gpu-01", 10.0)
    assert (seen.node.view, seen.jobs) == ("DRAINED", ())

    back = resume(rem_pool, target, fast_options)
    assert back.outcome is Outcome.SUCCEEDED, back.summary
    assert slurm.state() == "IDLE"
    assert "Reason=" not in slurm.show_node()
    assert "node gpu-01 is IDLE" in back.summary


def test_a_persons_drain_is_refused_and_shown(
        node_host: SimHost, slurm: SlurmCluster, rem_pool: ParamikoPool,
        fast_options: RemediationOptions) -> None:
    slurm.run("scontrol", "update", "NodeName=gpu-01", "State=DRAIN",
              "Reason=PSU swap, ticket 4411")
    result = drain(rem_pool, node_host.ssh_target(), fast_options)
    assert result.outcome is Outcome.REFUSED
    assert '"PSU swap, ticket 4411" (by root)' in result.summary
    assert "Reason=PSU swap, ticket 4411 [root@" in slurm.show_node()  # untouched
    assert not [c for c in session_commands(node_host) if "scontrol update" in c]
    back = resume(rem_pool, node_host.ssh_target(), fast_options)
    assert back.outcome is Outcome.REFUSED  # nor is a person's drain lifted
    assert slurm.state() == "IDLE+DRAIN"


def test_another_incidents_drain_is_said_and_kept_and_the_same_one_is_a_noop(
        node_host: SimHost, slurm: SlurmCluster, rem_pool: ParamikoPool,
        fast_options: RemediationOptions) -> None:
    target = node_host.ssh_target()
    assert drain(rem_pool, target, fast_options, incident="INC-3").outcome is Outcome.SUCCEEDED
    other = drain(rem_pool, target, fast_options, incident="INC-7")
    assert other.outcome is Outcome.REFUSED
    assert "already DRAINED by incident-bot for INC-3" in other.summary
    again = drain(rem_pool, target, fast_options, incident="INC-3")
    assert again.outcome is Outcome.NOOP, again.summary
    assert "INC-3" in slurm.show_node()


def test_revert_of_a_drain_is_a_verified_resume_through_sudo(
        node_host: SimHost, slurm: SlurmCluster, rem_pool: ParamikoPool,
        fast_options: RemediationOptions) -> None:
    target = replace(node_host.ssh_target(), sudo=True)
    result = drain(rem_pool, target, fast_options)
    assert result.outcome is Outcome.SUCCEEDED and result.revertable
    assert result.commands[0].command.startswith("sudo -n scontrol update NodeName=gpu-01 ")
    undo = revert_result(rem_pool, target, result, approver="U0AAAAAAA", evidence_hash=None,
                         audit=None, options=fast_options)
    assert (undo.kind, undo.outcome) == ("slurm.resume", Outcome.SUCCEEDED), undo.summary
    assert slurm.state() == "IDLE"


def test_unknown_node_fails_at_capture_and_nothing_runs(
        node_host: SimHost, rem_pool: ParamikoPool, fast_options: RemediationOptions) -> None:
    result = execute(rem_pool, node_host.ssh_target(), "slurm.drain",
                     {"node": "gpu-99", "reason": FINDING}, approver="U0AAAAAAA",
                     evidence_hash=None, audit=None, options=fast_options)
    assert result.outcome is Outcome.FAILED
    assert "Slurm does not know node gpu-99" in result.summary
    assert result.commands == ()


def job_action(pool: ParamikoPool, target: SSHTarget, options: RemediationOptions, kind: str,
               job: str) -> ActionResult:
    return execute(pool, target, kind, {"node": "gpu-01", "job": job}, approver="U0AAAAAAA",
                   evidence_hash=None, audit=None, options=options, incident_id="INC-7")


def test_drain_then_requeue_sends_the_job_back_to_the_queue(
        node_host: SimHost, slurm: SlurmCluster, rem_pool: ParamikoPool,
        fast_options: RemediationOptions) -> None:
    job = slurm.sbatch("train-llm")
    target = node_host.ssh_target()
    assert drain(rem_pool, target, fast_options).outcome is Outcome.SUCCEEDED
    result = job_action(rem_pool, target, fast_options, "slurm.requeue", job)
    assert result.outcome is Outcome.SUCCEEDED, result.summary
    assert result.summary.startswith(f"requeued Slurm job {job} on node gpu-01; ")
    assert slurm.run("squeue", "-h", "-j", job, "-o", "%T").stdout.strip() == "PENDING"
    slurm.wait(lambda: slurm.state() == "IDLE+DRAIN", "DRAINED after the requeue")


def test_cancel_ends_the_job_and_a_job_elsewhere_is_refused(
        node_host: SimHost, slurm: SlurmCluster, rem_pool: ParamikoPool,
        fast_options: RemediationOptions) -> None:
    job = slurm.sbatch("eval")
    target = node_host.ssh_target()
    other = job_action(rem_pool, target, fast_options, "slurm.cancel", str(int(job) + 1000))
    assert other.outcome is Outcome.REFUSED
    assert f"does not run on node gpu-01 (running there: {job})" in other.summary
    assert slurm.jobs() == [job]
    result = job_action(rem_pool, target, fast_options, "slurm.cancel", job)
    assert result.outcome is Outcome.SUCCEEDED, result.summary
    assert job not in slurm.jobs()


def test_drained_nodes_and_overdue_drains(
        node_host: SimHost, slurm: SlurmCluster, rem_pool: ParamikoPool,
        fast_options: RemediationOptions) -> None:
    target = node_host.ssh_target()
    assert drained_nodes(rem_pool, target, 10.0) == []
    assert drain(rem_pool, target, fast_options).outcome is Outcome.SUCCEEDED
    (node,) = drained_nodes(rem_pool, target, 10.0)
    assert (node.name, node.view, node.incident, node.reason_user) == \
        ("gpu-01", "DRAINED", "INC-7", "root")
    since = reason_epoch(node)
    assert since is not None and abs(since - time.time()) < 120  # the sim prints UTC
    later = since + 7200
    assert overdue([node], later, 3600, open_incidents=set()) == [node]
    assert overdue([node], later, 3600, open_incidents={"INC-7"}) == []
    assert overdue([node], since + 60, 3600, open_incidents=set()) == []


def test_act_cli_drains_with_the_config_and_prints_the_revert(
        node_host: SimHost, slurm: SlurmCluster, tmp_path: Path, redis_url: str,
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from bot.cli import main

    config = one_host_config(tmp_path / "bot.yaml", node_host, slurm_node="gpu-01")
    monkeypatch.setenv("REDIS_URL", redis_url)
    code = main(["act", "gpu-01", "slurm.drain", "node=gpu-01", f"reason={FINDING}",
                 "incident=INC-7", "--yes", "--config", str(config)])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "succeeded: drained Slurm node gpu-01; node gpu-01 is DRAINED" in out
    assert "slurm.resume" not in out  # the node goes back only through the health gate
    assert slurm.state() == "IDLE+DRAIN"


def test_the_node_returns_only_through_a_passed_gate(
        node_host: SimHost, sims: Callable[[str], SimHost], slurm: SlurmCluster,
        rem_pool: ParamikoPool, fast_options: RemediationOptions) -> None:
    target = node_host.ssh_target()
    drained = drain(rem_pool, target, fast_options)
    assert drained.outcome is Outcome.SUCCEEDED
    assert [o.kind for o in offers(drained)] == []  # no Revert button for a drain

    broken = run_gate(rem_pool, sims("gpu_xid79").ssh_target(),
                      options=PlaybookOptions(expected_gpus=8))
    assert not broken.passed
    assert return_to_slurm(drained, broken) is None
    assert gate_note(drained, broken).startswith("health gate failed: gpu-01 stays drained (")

    healthy = run_gate(rem_pool, target)
    assert healthy.passed, healthy.reasons
    back = return_to_slurm(drained, healthy)
    assert back is not None and (back.kind, back.params) == ("slurm.resume", {"node": "gpu-01"})
    assert back.reason == f"Return gpu-01 to Slurm: the health gate passed on {target.name}"
    result = execute(rem_pool, target, back.kind, back.params, approver="U0AAAAAAA",
                     evidence_hash=None, audit=None, options=fast_options, incident_id="INC-7")
    assert result.outcome is Outcome.SUCCEEDED, result.summary
    assert slurm.state() == "IDLE" and "Reason=" not in slurm.show_node()


def test_a_down_node_with_a_persons_reason_is_not_drained_over_it(
        node_host: SimHost, slurm: SlurmCluster, rem_pool: ParamikoPool,
        fast_options: RemediationOptions) -> None:
    slurm.run("scontrol", "update", "NodeName=gpu-01", "State=DOWN", "Reason=bad DIMM")
    result = drain(rem_pool, node_host.ssh_target(), fast_options)
    assert result.outcome is Outcome.REFUSED
    assert 'node gpu-01 is already DOWN with a reason a person set: "bad DIMM"' in result.summary
    assert "Reason=bad DIMM [root@" in slurm.show_node()


class PostedChat:
    """Records what the escalation posts (Slack itself is out of scope here)."""

    def __init__(self) -> None:
        self.posts: list[tuple[str, ChatMessage]] = []

    def post(self, channel: str, message: ChatMessage,
             thread: MessageRef | None = None) -> MessageRef:
        self.posts.append((channel, message))
        return MessageRef(channel, str(len(self.posts)))

    def update(self, ref: MessageRef, message: ChatMessage) -> None:
        raise AssertionError("the escalation never edits")


def test_a_node_drained_too_long_for_a_closed_incident_is_escalated_once(
        node_host: SimHost, slurm: SlurmCluster, rem_pool: ParamikoPool,
        fast_options: RemediationOptions, redis: Redis) -> None:
    target = node_host.ssh_target()
    cache = DrainedCache(rem_pool, lambda: target, 10.0, ttl_s=0.0)
    chat = PostedChat()
    open_ids: set[str] = {"INC-7"}
    esc = DrainedEscalator(Claims(redis), cast(ChatBackend, chat),
                           Target("C0ESC", "<!subteam^S0123> "), cache.cached,
                           lambda: open_ids, max_age_s=3600)
    assert esc.run() == [] and cache.cached() == []  # nothing drained
    assert drain(rem_pool, target, fast_options).outcome is Outcome.SUCCEEDED
    (node,) = cache.cached()
    assert node.since is not None and node.by_bot and node.incident == "INC-7"
    assert esc.run(node.since + 7200) == []  # its incident is still open
    open_ids.clear()
    assert esc.run(node.since + 60) == []  # closed, but not drained long enough
    assert esc.run(node.since + 7200) == ["gpu-01"]
    assert esc.run(node.since + 7300) == []  # once per drain
    (channel, message), = chat.posts
    assert channel == "C0ESC" and message.header == "Drained too long: Slurm node gpu-01"
    assert message.text.startswith("<!subteam^S0123> :rotating_light: Slurm node gpu-01 has "
                                   "been DRAINED by incident-bot for 2 h and its incident INC-7")
    assert "Reason: incident-bot INC-7: GPU 2 fell off the bus (Xid 79)" in message.text
