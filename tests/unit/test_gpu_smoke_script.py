"""playbooks/smoke/gpu_smoke.py, the health gate's CUDA smoke, run here with this machine's
torch (CPU: there is no GPU) the way the gate sends it (its text on stdin to ``python3 -``);
what it prints goes through the bot's own parser."""

from __future__ import annotations

import subprocess
import sys

from playbooks.parsers.smoke import parse_smoke
from playbooks.smoke import MARKER, script_text


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-", MARKER, *args], input=script_text(),
                          capture_output=True, text=True, timeout=120, check=False)


def test_cpu_path_measures_and_checks_what_it_computed() -> None:
    done = run("--device", "cpu", "--matmul-n", "192", "--iters", "2", "--dtype", "fp32",
               "--mem-mib", "24", "--chunk-mib", "8", "--h2d-mib", "8")
    assert done.returncode == 0, done.stdout + done.stderr
    rep = parse_smoke(done.stdout)
    assert rep.done and rep.error is None and rep.torch
    (gpu,) = rep.gpus
    assert gpu.errors == () and gpu.matmul_tflops and gpu.matmul_tflops > 0
    assert gpu.mem_checked_gib is not None and abs(gpu.mem_checked_gib - 24 / 1024) < 0.005
    assert gpu.mem_gbps and gpu.h2d_gbps and gpu.seconds is not None


def test_without_cuda_it_says_why_and_exits_3() -> None:
    done = run()  # --device cuda on a machine whose torch sees no GPU
    assert done.returncode == 3
    rep = parse_smoke(done.stdout)
    assert rep.error is not None and "no CUDA device" in rep.error and not rep.gpus
