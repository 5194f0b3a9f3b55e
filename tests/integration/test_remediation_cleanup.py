"""ML-aware disk cleanup on a simulated full disk: real (sparse) files in the sim's
sandbox root, real ``find``/``rm``, the sim's ``lsof`` and ``df``. It must free the
bytes needed and never touch the canaries: an open file, a paused job's output, a
path outside the host's allowed prefixes."""

from __future__ import annotations

import subprocess
from dataclasses import replace

import pytest

from bot.remediation import Outcome, execute
from bot.remediation import cleanup as cl
from bot.remediation.options import RemediationOptions
from bot.sim import sandbox
from bot.sim.sshd import SimHost
from bot.ssh.pool import ParamikoPool
from tests.fixtures.need import need
from tests.fixtures.remediation import FAST
from tests.fixtures.sim import SimFactory

G = 1024 ** 3
ALLOWED = ("/data", "/var")
PAUSED = "/data/jobs/job-paused"
OPTS = replace(FAST, allowed_prefixes=ALLOWED, protected_dirs=(PAUSED,))
OPEN = "/data/cache/huggingface/hub/models--moonshotai--Kimi-K2.5/blobs/0a0b0c"
OUTSIDE = "/shared/models/huggingface/hub/models--x--y/blobs/ffee"
CANARIES = (OPEN, OUTSIDE, f"{PAUSED}/out/checkpoints/run-p/step-1.pt",
            "/data/checkpoints/run-a/step-2000.pt", "/data/checkpoints/run-a/step-3000.pt")


@pytest.fixture
def full(sim_factory: SimFactory) -> SimHost:
    need(sandbox.available(), "sim sandbox needs root and unshare")
    return sim_factory("disk_full_ml")


def exists(host: SimHost, path: str) -> bool:
    out = subprocess.run(host.ssh_argv(f"test -f {path} && echo yes || echo no"),
                         capture_output=True, text=True, timeout=30)
    return out.stdout.strip() == "yes"


def run(pool: ParamikoPool, host: SimHost, params: dict[str, str],
        options: RemediationOptions = OPTS) -> object:
    return execute(pool, host.ssh_target(), "disk.cleanup", params, approver="U1",
                   evidence_hash=None, audit=None, options=options, incident_id="INC-D")


def test_candidates_are_ranked_and_skip_every_canary(full: SimHost,
                                                     rem_pool: ParamikoPool) -> None:
    cands = cl.candidates(rem_pool, full.ssh_target(), allowed=ALLOWED, protected=(PAUSED,))
    paths = {p for c in cands for p in c.paths}
    assert not paths & set(CANARIES)
    assert [c.size for c in cands] == sorted((c.size for c in cands), reverse=True)
    by_label = {c.label: c for c in cands}
    assert by_label["/data/checkpoints/run-b/checkpoint-500"].size == 300 * G
    assert by_label["/data/checkpoints/run-a/step-1000.pt"].category == "checkpoint"
    assert {c.category for c in cands} == {"hf_cache", "torch_hub", "pip_cache", "checkpoint",
                                           "core_dump"}
    assert "/data/checkpoints/run-b/checkpoint-1000" not in by_label  # newest two kept


def test_cleanup_frees_the_bytes_needed_and_leaves_the_canaries(
    full: SimHost, rem_pool: ParamikoPool
) -> None:
    cands = cl.candidates(rem_pool, full.ssh_target(), allowed=ALLOWED, protected=(PAUSED,))
    chosen = cl.choose(cands, 500 * G)
    assert sum(c.size for c in chosen) >= 500 * G
    lines = cl.preview(chosen, now=full.state()["boot"]["time"] + 5400)
    # largest first; of equal sizes the oldest (run-b's entry, 20 d, before run-a's 10 d)
    assert lines[0].split()[:2] == ["300.0", "GiB"] and lines[0].endswith("run-b/checkpoint-500")
    assert lines[1].split()[:2] == ["300.0", "GiB"] and lines[1].endswith("run-a/step-1000.pt")
    params = {"paths": cl.paths_param(chosen), "need_bytes": str(500 * G)}
    result = run(rem_pool, full, params)
    assert result.outcome is Outcome.SUCCEEDED, result.summary  # type: ignore[attr-defined]
    ev = result.verification.evidence  # type: ignore[attr-defined]
    assert ev["freed_bytes"] >= 500 * G and "/data" in ev["per_mount"]
    assert not any(exists(full, p) for c in chosen for p in c.paths)
    assert all(exists(full, p) for p in CANARIES)


@pytest.mark.parametrize(("path", "why"), [
    (OPEN, "is open in a process"),
    (f"{PAUSED}/out/checkpoints/run-p/step-1.pt", "the output of a paused or queued job"),
    (OUTSIDE, "outside gpu-02's allowed prefixes"),
])
def test_a_canary_named_explicitly_is_refused_and_nothing_is_deleted(
    full: SimHost, rem_pool: ParamikoPool, path: str, why: str
) -> None:
    other = "/data/checkpoints/run-a/step-1000.pt"
    result = run(rem_pool, full, {"paths": f"{other}|{path}"})
    assert result.outcome is Outcome.REFUSED, result.summary  # type: ignore[attr-defined]
    assert why in result.summary  # type: ignore[attr-defined]
    assert exists(full, path) and exists(full, other)
    rms = [e for e in full.command_log() if "command" in e and "rm -f" in str(e["command"])]
    assert rms == []
