"""Real-GPU check: the NVML probes, the agent's GPU checks and the gpu_health playbook
run on this machine, and what each saw printed. Without a GPU it says so and exits 0.

    PYTHONPATH=. python scripts/gpu_check.py [--out DIR]

``--out`` (or ``$OUT``) keeps the raw ``nvidia-smi`` outputs, for tests/fixtures/real/.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bot.domain.findings import ProbeResult  # noqa: E402
from bot.ssh.base import Command, SSHTarget  # noqa: E402
from playbooks import commands  # noqa: E402


class LocalRunner:
    """``SSHRunner`` for this machine: each command through ``bash -c`` with its deadline."""

    def run(self, target: SSHTarget, command: Command) -> ProbeResult:
        start = time.monotonic()
        try:
            done = subprocess.run(["bash", "-c", command.argv_text], capture_output=True,
                                  text=True, timeout=command.timeout_s)
        except subprocess.TimeoutExpired:
            return ProbeResult(command.name, command.argv_text, None,
                               time.monotonic() - start, timed_out=True)
        return ProbeResult(command.name, command.argv_text, done.returncode,
                           time.monotonic() - start, stdout=done.stdout, stderr=done.stderr)

    def run_many(self, target: SSHTarget, cmds: Sequence[Command]) -> list[ProbeResult]:
        return [self.run(target, c) for c in cmds]

    def close(self) -> None:
        return None


def nvml_probe() -> tuple[Any, int] | None:
    """Init NVML; None (and the reason printed) when there is no GPU stack here."""
    try:
        import pynvml
    except ImportError as exc:
        print(f"no GPU check: pynvml (nvidia-ml-py) is not installed ({exc})")
        return None
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as exc:
        print(f"no GPU here: NVML did not initialise ({exc})")
        return None
    count = pynvml.nvmlDeviceGetCount()
    print(f"NVML: driver {pynvml.nvmlSystemGetDriverVersion()}, {count} GPU(s)")
    for i in range(count):
        print("  " + json.dumps(_device(pynvml, i)))
    return pynvml, count


def _try(fn: Any) -> Any:
    try:
        value = fn()
    except Exception as exc:  # a field the board (or this NVML) does not have is data too
        return f"error: {type(exc).__name__}: {exc}"
    return value.decode() if isinstance(value, bytes) else value


def _device(nvml: Any, i: int) -> dict[str, Any]:
    h = nvml.nvmlDeviceGetHandleByIndex(i)
    mem = nvml.nvmlDeviceGetMemoryInfo(h)
    return {"index": i, "name": _try(lambda: nvml.nvmlDeviceGetName(h)),
            "uuid": _try(lambda: nvml.nvmlDeviceGetUUID(h)),
            "bus_id": _try(lambda: nvml.nvmlDeviceGetPciInfo(h).busId),
            "memory_used_mib": int(mem.used) >> 20, "memory_total_mib": int(mem.total) >> 20,
            "util_pct": _try(lambda: nvml.nvmlDeviceGetUtilizationRates(h).gpu),
            "persistence": _try(lambda: nvml.nvmlDeviceGetPersistenceMode(h)),
            "ecc_uncorrected_volatile": _try(lambda: nvml.nvmlDeviceGetTotalEccErrors(h, 1, 0)),
            "remapped_rows": _try(lambda: nvml.nvmlDeviceGetRemappedRows(h)),
            "clock_event_reasons": _try(
                lambda: nvml.nvmlDeviceGetCurrentClocksThrottleReasons(h))}


def run_agent(count: int) -> None:
    """The agent's checks once against the real NVML, alerts captured instead of sent."""
    from bot.agent.client import Reply
    from bot.agent.config import AgentConfig
    from bot.agent.runner import Agent

    sent: list[dict[str, Any]] = []

    def send(url: str, token: str, alerts: list[dict[str, Any]], timeout: float) -> Reply:
        sent.extend(alerts)
        return Reply(200, "{}")

    with tempfile.TemporaryDirectory() as tmp:
        boot = Path(tmp) / "boot_id"
        boot.write_text("gpu-check\n")
        cfg = AgentConfig(url="http://bot.invalid", token="x", host="gpu-check",
                          state_dir=Path(tmp) / "agent", boot_id_path=boot, mounts=(tmp,),
                          expected_gpus=count, idle_for_s=0)
        code = Agent(cfg, send=send).run_once()
    print(f"agent: exit {code}, {len(sent)} alert(s)")
    for alert in sent:
        print(f"  {alert['kind']} {alert['status']}: {alert['summary']}")


def run_health(out: Path | None, count: int) -> None:
    from playbooks import PlaybookOptions, run_playbook

    target = SSHTarget(name="localhost", host="127.0.0.1", port=22, user="local")
    d = run_playbook(LocalRunner(), target, "gpu_health",
                     options=PlaybookOptions(expected_gpus=count))
    print(f"gpu_health: {d.status.value} in {d.duration_s:.2f} s")
    for f in d.findings:
        print(f"  [{f.severity.value}] {f.code}: {f.title}")
        if f.code == "gpu.verdicts":
            print("    " + str(f.evidence.get("grid", "")).replace("\n", "\n    "))
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        for p in d.probes:
            (out / f"{p.name}.txt").write_text(p.stdout + ("\n--- stderr\n" + p.stderr
                                                           if p.stderr else ""))
        print(f"raw outputs in {out}")


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=os.environ.get("OUT"))
    args = ap.parse_args(argv)
    if shutil.which("nvidia-smi") is None:
        print("no GPU here: nvidia-smi is not installed")
    found = nvml_probe()
    if found is None:
        print("nothing else to check on this machine")
        return 0
    nvml, count = found
    nvml.nvmlShutdown()  # the agent opens NVML itself, as it does on a host
    run_agent(count)
    run_health(Path(args.out) if args.out else None, count)
    print(f"kernel log command: {commands.KERNEL_LOG_COMMAND}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
