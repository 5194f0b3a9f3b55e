"""The GPU sampler's shell text, run by a real ``sh`` against an nvidia-smi stand-in
(no GPU here): samples come out in the order they were started, separated, and the
first failing sample's exit status is the probe's."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from playbooks import PlaybookOptions, probes
from playbooks.parsers.nvidia import parse_gpu_samples

STAND_IN = """#!/bin/sh
n=$(date +%s%N)
sleep "${DELAY:-0.2}"
echo "0, GPU-aaaa, 1000, 81559, $n, NVIDIA H100"
exit "${FAIL:-0}"
"""


def run(tmp_path: Path, samples: int, **env: str) -> subprocess.CompletedProcess[str]:
    smi = tmp_path / "nvidia-smi"
    smi.write_text(STAND_IN)
    smi.chmod(0o755)
    command = probes.gpu_samples(PlaybookOptions(samples=samples, sample_interval_s=0.1)).command
    return subprocess.run(["sh", "-c", command], capture_output=True, text=True, timeout=30,
                          env={**os.environ, "PATH": f"{tmp_path}:{os.environ['PATH']}", **env})


def test_samples_are_printed_in_start_order_and_parse(tmp_path: Path) -> None:
    proc = run(tmp_path, 4)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.count("---") == 3
    rows = [line for line in proc.stdout.splitlines() if line.startswith("0,")]
    starts = [int(r.split(",")[4]) for r in rows]
    assert starts == sorted(starts) and len(set(starts)) == 4
    assert len(parse_gpu_samples(proc.stdout)) == 4


def test_a_failing_sample_fails_the_probe_with_its_status(tmp_path: Path) -> None:
    proc = run(tmp_path, 3, FAIL="9", DELAY="0")
    assert proc.returncode == 9


def test_one_sample_has_no_separator(tmp_path: Path) -> None:
    proc = run(tmp_path, 1, DELAY="0")
    assert proc.returncode == 0 and "---" not in proc.stdout
