"""The GPU sampler's shell text, run by a real ``sh`` against an nvidia-smi stand-in
(no GPU here) that loops like the real ``-lms`` one: one tool start for every sample
(issue 37), samples out in order and separated, the loop stopped once the last sample is
complete, a GPU missing from a sample handled, and nvidia-smi's own failure status kept."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

from playbooks import PlaybookOptions, probes
from playbooks.parsers.nvidia import parse_gpu_samples

# count, then the fields the parser reads; a start-up delay, then a row per GPU every
# -lms milliseconds until killed. GPUS rows of COUNT (a lost GPU: fewer rows than count,
# with nvidia-smi's error line first). FAIL: print an error and exit at once.
STAND_IN = """#!/bin/sh
echo start >> "$LOG"
if [ -n "$FAIL" ]; then
  echo "Failed to initialize NVML: Driver/library version mismatch"; exit "$FAIL"
fi
ms=250; while [ $# -gt 0 ]; do [ "$1" = -lms ] && ms=$2; shift; done
sleep "${DELAY:-0.1}"
k=0
while :; do
  [ -n "$LOST" ] && echo "Unable to determine the device handle for GPU 0000:3B:00.0: Unknown Error"
  g=0
  while [ $g -lt "${GPUS:-2}" ]; do
    echo "${COUNT:-2}, $g, GPU-$g, 1000, 81559, $k, NVIDIA H100 80GB HBM3, rev 1"
    g=$((g+1))
  done
  k=$((k+1))
  sleep "$(echo "$ms" | awk '{print $1/1000}')"
done
"""


def run(tmp_path: Path, samples: int, interval_s: float = 0.1,
        **env: str) -> subprocess.CompletedProcess[str]:
    smi = tmp_path / "nvidia-smi"
    smi.write_text(STAND_IN)
    smi.chmod(0o755)
    opts = PlaybookOptions(samples=samples, sample_interval_s=interval_s)
    return subprocess.run(["sh", "-c", probes.gpu_samples(opts).command], capture_output=True,
                          text=True, timeout=30,
                          env={**os.environ, "PATH": f"{tmp_path}:{os.environ['PATH']}",
                               "LOG": str(tmp_path / "starts"), **env})


def test_one_tool_start_for_every_sample_in_order(tmp_path: Path) -> None:
    start = time.monotonic()
    proc = run(tmp_path, 4)
    took = time.monotonic() - start
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "starts").read_text().count("start") == 1
    samples = parse_gpu_samples(proc.stdout)
    assert len(samples) == 4 and all(len(s) == 2 for s in samples)
    assert [s[0].utilization_pct for s in samples] == [0, 1, 2, 3]  # in the order printed
    assert samples[0][0].name == "NVIDIA H100 80GB HBM3, rev 1"  # a comma in the name kept
    assert proc.stdout.count("---") == 3
    assert took < 5, "stopped after the last sample, not left looping"


def test_the_loop_is_stopped_once_the_last_sample_is_in(tmp_path: Path) -> None:
    run(tmp_path, 2)
    left = subprocess.run(["pgrep", "-f", str(tmp_path / "nvidia-smi")], capture_output=True,
                          text=True, check=False)
    assert left.stdout.strip() == "", "the looping nvidia-smi outlived the probe"


def test_a_gpu_missing_from_each_sample_still_ends_each_sample(tmp_path: Path) -> None:
    proc = run(tmp_path, 3, COUNT="3", GPUS="2", LOST="1")
    assert proc.returncode == 0, proc.stderr
    samples = parse_gpu_samples(proc.stdout)
    assert len(samples) == 3 and all(len(s) == 2 for s in samples)
    assert "Unable to determine the device handle for GPU 0000:3B:00.0" in proc.stdout


def test_nvidia_smis_own_failure_is_the_probes_status(tmp_path: Path) -> None:
    proc = run(tmp_path, 3, FAIL="18")
    assert proc.returncode == 18
    assert "Driver/library version mismatch" in proc.stdout


def test_one_sample_has_no_separator(tmp_path: Path) -> None:
    proc = run(tmp_path, 1, DELAY="0")
    assert proc.returncode == 0 and "---" not in proc.stdout
    assert len(parse_gpu_samples(proc.stdout)) == 1
