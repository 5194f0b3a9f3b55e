"""Slurm parsers over real controller output (tests/fixtures/real/slurm_*.txt)."""

from __future__ import annotations

from pathlib import Path

import pytest

from playbooks.parsers.slurm import (
    SlurmJob,
    SlurmNode,
    job_of_cgroup,
    job_of_stepd,
    left_seconds,
    parse_jobs,
    parse_node,
    parse_nodes,
    reason_epoch,
    split_state,
)

REAL = Path(__file__).resolve().parents[1] / "fixtures" / "real"


def node(name: str) -> SlurmNode:
    parsed = parse_node((REAL / name).read_text())
    assert parsed is not None
    return parsed


@pytest.mark.parametrize(("name", "state", "view", "usable"), [
    ("slurm_show_node_idle.txt", "IDLE", "IDLE", True),
    ("slurm_show_node_allocated.txt", "ALLOCATED", "ALLOCATED", True),
    ("slurm_show_node_draining.txt", "ALLOCATED+DRAIN", "DRAINING", False),
    ("slurm_show_node_drained.txt", "IDLE+DRAIN", "DRAINED", False),
    ("slurm_show_node_drained_multiline.txt", "IDLE+DRAIN", "DRAINED", False),
    ("slurm_show_node_draining_person.txt", "ALLOCATED+DRAIN", "DRAINING", False),
])
def test_node_states(name: str, state: str, view: str, usable: bool) -> None:
    n = node(name)
    assert (n.name, n.state, n.view, n.usable) == ("gpu-01", state, view, usable)


def test_bot_reason_names_the_incident_and_who_set_it() -> None:
    for name in ("slurm_show_node_draining.txt", "slurm_show_node_drained_multiline.txt"):
        n = node(name)
        assert n.reason == "incident-bot INC-7: GPU 2 fell off the bus (Xid 79)"
        assert (n.reason_user, n.reason_time) == ("root", "2026-12-02T13:36:28")
        assert n.by_bot and n.incident == "INC-7"


def test_a_persons_reason_is_not_the_bots() -> None:
    n = node("slurm_show_node_draining_person.txt")
    assert n.reason == "maintenance: PSU swap"
    assert not n.by_bot and n.incident is None


def test_idle_node_has_no_reason_and_unknown_node_is_none() -> None:
    assert node("slurm_show_node_idle.txt").reason == ""
    assert parse_node((REAL / "slurm_show_node_not_found.txt").read_text()) is None
    assert parse_node("") is None


@pytest.mark.parametrize(("word", "base", "flags"), [
    ("IDLE", "IDLE", ()),
    ("MIXED+DRAIN", "MIXED", ("DRAIN",)),
    ("DOWN*+DRAIN", "DOWN", ("DRAIN", "NOT_RESPONDING")),  # rackslab/Slurm-web#153
    ("IDLE+COMPLETING+DRAIN", "IDLE", ("COMPLETING", "DRAIN")),
    ("idle+not_responding", "IDLE", ("NOT_RESPONDING",)),
])
def test_split_state(word: str, base: str, flags: tuple[str, ...]) -> None:
    assert split_state(word) == (base, flags)


def test_views_of_flags() -> None:
    assert SlurmNode("n", "MIXED", ("DRAIN",)).view == "DRAINING"
    assert SlurmNode("n", "IDLE", ("COMPLETING", "DRAIN")).view == "DRAINING"
    assert SlurmNode("n", "DOWN", ("DRAIN",)).view == "DRAINED"
    assert SlurmNode("n", "IDLE", ("NOT_RESPONDING",)).view == "IDLE*"
    assert not SlurmNode("n", "IDLE", ("NOT_RESPONDING",)).usable


def test_reason_without_user_and_time() -> None:
    n = parse_node("NodeName=a State=IDLE+DRAIN Reason=by hand")
    assert n is not None and (n.reason, n.reason_user) == ("by hand", "")


def test_squeue_rows() -> None:
    assert parse_jobs((REAL / "slurm_squeue_running.txt").read_text()) == [
        SlurmJob("2", "root", "eval run", "1:29:58", "RUNNING")]
    assert parse_jobs((REAL / "slurm_squeue_unlimited.txt").read_text()) == [
        SlurmJob("1", "root", "train-llm", "UNLIMITED", "RUNNING")]
    assert parse_jobs("7|alice|a|b|c|5:00|RUNNING\n\ngarbage\n") == [
        SlurmJob("7", "alice", "a|b|c", "5:00", "RUNNING")]


@pytest.mark.parametrize(("text", "secs"), [
    ("1:29:58", 5398), ("2-03:04:05", 183845), ("5:00", 300), ("UNLIMITED", None),
    ("NOT_SET", None),
])
def test_left_seconds(text: str, secs: int | None) -> None:
    assert left_seconds(text) == secs


@pytest.mark.parametrize(("cgroup", "job"), [
    ("0::/system.slice/slurmstepd.scope/job_4242/step_batch/user/task_0", "4242"),
    ("4:memory:/slurm/uid_1000/job_77/step_0/task_0", "77"),
    ("4:memory:/slurm_node01/uid_0/job_5/step_extern", "5"),
    ("0::/system.slice/vllm.service", None),
    ("0::/user.slice/job_12.scope", None),
])
def test_job_of_cgroup(cgroup: str, job: str | None) -> None:
    assert job_of_cgroup(cgroup) == job


def test_job_of_stepd_on_a_real_process_tree() -> None:
    rows = [line.split(None, 3) for line in
            (REAL / "slurm_ps_job_tree.txt").read_text().splitlines()]
    titles = {int(r[0]): r[3] for r in rows}
    assert job_of_stepd(titles[min(titles)]) == "1"  # slurmstepd: [1.batch]
    assert [job_of_stepd(t) for p, t in titles.items() if p != min(titles)] == [None, None]
    assert job_of_stepd("slurmstepd: [12.extern]") == "12"
    assert job_of_stepd("python slurmstepd: [12.0]") is None


def test_every_node_and_when_its_reason_was_set() -> None:
    text = "".join((REAL / n).read_text() for n in (
        "slurm_show_node_idle.txt", "slurm_show_node_draining.txt"))
    nodes = parse_nodes(text)
    assert [n.view for n in nodes] == ["IDLE", "DRAINING"]
    assert reason_epoch(nodes[1]) == 1796218588.0  # 2026-12-02T13:36:28 UTC
    assert reason_epoch(nodes[1], utc_offset_s=3600) == 1796218588.0 - 3600
    assert reason_epoch(nodes[0]) is None
