"""The drain-first rule and a Slurm job's process, over plain data."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.domain import validate
from bot.domain.findings import Severity
from playbooks.base import Report
from playbooks.holders import slurm_job_of
from playbooks.parsers.ps import Proc
from playbooks.slurm import drain_first, job_steps, reason_text

REAL = Path(__file__).resolve().parents[1] / "fixtures" / "real"


def report(code: str = "gpu.broken", severity: Severity = Severity.CRITICAL) -> Report:
    r = Report("gpu-01")
    r.find("gpu.verdicts", Severity.CRITICAL, "8 GPUs: 1 broken, 7 busy")
    r.find(code, severity, "GPU 2 (0000:3b:00) is broken: Xid 79 «fallen off the bus»")
    r.propose("host.reboot", {}, "reboot")
    return r


def test_drain_goes_first_and_names_the_incident() -> None:
    r = report()
    drain_first(r, "gpu-01", {"incident_id": "INC-9"})
    assert [a.kind for a in r.actions] == ["slurm.drain", "host.reboot"]
    assert r.actions[0].params == {
        "node": "gpu-01", "incident": "INC-9",
        "reason": "GPU 2 (0000:3b:00) is broken: Xid 79 fallen off the bus"}


@pytest.mark.parametrize(("node", "code", "severity", "context"), [
    (None, "gpu.broken", Severity.CRITICAL, {}),  # not a Slurm node
    ("gpu-01", "gpu.degraded", Severity.WARNING, {}),  # not a hardware fault
    ("gpu-01", "gpu.tool_error", Severity.WARNING, {}),  # an unreadable line only
    ("gpu-[01-02]", "gpu.broken", Severity.CRITICAL, {}),  # not one node
])
def test_no_drain(node: str | None, code: str, severity: Severity,
                  context: dict[str, str]) -> None:
    r = report(code, severity)
    drain_first(r, node, context)
    assert [a.kind for a in r.actions] == ["host.reboot"]


def test_a_bad_incident_id_is_left_out_not_sent() -> None:
    r = report()
    drain_first(r, "gpu-01", {"incident_id": "INC 7; reboot"})
    assert r.actions[0].params["incident"] == ""


@pytest.mark.parametrize("title", [
    "GPU 0 is broken: ECC «uncorrectable» [x] = 3 'quoted' \"dq\" `tick` $HOME",
    "…" * 10, "x" * 400, "- leading dash and spaces   ", "a" + " b" * 200,
])
def test_reason_text_always_fits_the_grammar(title: str) -> None:
    text = reason_text(title)
    assert validate.is_valid(validate.slurm_reason, text), text
    assert len(text) <= 160


def test_slurm_job_of_walks_up_to_slurmstepd() -> None:
    rows = [line.split(None, 3) for line in
            (REAL / "slurm_ps_job_tree.txt").read_text().splitlines()]
    procs = {int(r[0]): Proc(int(r[0]), int(r[1]), 0, r[2], "0::/system.slice/slurmd.service",
                             r[3]) for r in rows}
    sleeper = max(procs)
    assert procs[sleeper].args == "sleep 30"
    assert slurm_job_of(sleeper, procs) == "1"
    procs[1] = Proc(1, 0, 0, "root", "0::/init.scope", "/sbin/init")
    assert slurm_job_of(1, procs) is None
    loop = {5: Proc(5, 6, 0, "u", "", "a"), 6: Proc(6, 5, 0, "u", "", "b")}
    assert slurm_job_of(5, loop) is None  # a cycle ends, no hang


def test_job_steps_requeue_then_cancel_and_only_valid_jobs() -> None:
    r = Report("gpu-01")
    r.find("slurm.job_holder", Severity.WARNING, "PID 440 belongs to Slurm job 4242",
           job="4242", user="alice", pid=440)
    r.find("slurm.job_holder", Severity.WARNING, "PID 441 belongs to Slurm job x",
           job="4242; reboot", user="eve", pid=441)
    job_steps(r, "gpu-01")
    assert [(a.kind, a.params) for a in r.actions] == [
        ("slurm.requeue", {"node": "gpu-01", "job": "4242"}),
        ("slurm.cancel", {"node": "gpu-01", "job": "4242"})]
    bare = Report("gpu-01")
    bare.findings = list(r.findings)
    job_steps(bare, None)
    assert bare.actions == []


@pytest.mark.parametrize(("value", "ok"), [
    ("4242", True), ("4242_7", True), (4242, True), ("0", False), ("42,43", False),
    ("4242_", False), ("-1", False), ("4242 4243", False), (True, False)])
def test_slurm_job_grammar(value: object, ok: bool) -> None:
    assert validate.is_valid(validate.slurm_job, value) is ok


def test_one_gpus_reason_prefers_the_xid() -> None:
    r = Report("gpu-01")
    r.find("gpu.broken", Severity.CRITICAL, "GPU 3 (0000:5d:00) is broken: a; b; c",
           gpu={"index": 3, "verdict": "broken",
                "reasons": ["Unable to determine the device handle", "Xid 79 since boot"]})
    drain_first(r, "gpu-01", {})
    assert r.actions[0].params["reason"] == "GPU 3 broken: Xid 79 since boot"
    m = Report("gpu-01")
    m.find("gpu.missing", Severity.CRITICAL, "1 of 8 GPUs missing: x; y")
    drain_first(m, "gpu-01", {})
    assert m.actions[0].params["reason"] == "1 of 8 GPUs missing: x"
