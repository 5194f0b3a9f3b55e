"""scripts/gpu_check.py: without a GPU it says so and exits 0; with NVML (the fake here,
the real library on a GPU machine) it prints the devices, the agent's alerts and the
gpu_health verdicts."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.fixtures.fake_pynvml import write_shim

ROOT = Path(__file__).resolve().parents[2]


def run(env_path: list[str], tmp: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([*env_path, str(ROOT)])}
    env.pop("OUT", None)
    return subprocess.run([sys.executable, str(ROOT / "scripts/gpu_check.py"), "--out",
                           str(tmp / "raw")], capture_output=True, text=True, timeout=120,
                          env=env, cwd=tmp)


def test_without_a_gpu_it_says_so_and_exits_0(tmp_path: Path) -> None:
    done = run([], tmp_path)
    assert done.returncode == 0, done.stderr
    assert "no GPU here" in done.stdout or "no GPU check" in done.stdout
    assert "nothing else to check on this machine" in done.stdout


def test_with_nvml_it_reports_devices_agent_alerts_and_verdicts(tmp_path: Path) -> None:
    gpu = {"used_mib": 100, "util": 0, "samples": [], "processes": []}
    shim = write_shim(tmp_path / "nvml", {"gpus": [{**gpu, "xids": [79]}, gpu]})
    done = run([str(shim)], tmp_path)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "NVML: driver 550.54.15, 2 GPU(s)" in out
    assert "gpu_xid firing: Xid 79 on GPU 0: GPU has fallen off the bus" in out
    assert "gpu_health: " in out and "gpu.verdicts" in out
    assert (tmp_path / "raw" / "gpus.txt").exists()
