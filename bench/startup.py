"""Start-up, measured as whole processes from outside, side by side in one run.

  interpreter         ``python -c pass``: the floor every Python CLI pays
  --help              ``python -m bot.cli --help`` (the ``incident-bot`` entry point's code)
  diagnose imports    ``python -c "import bot.commands.diagnose, playbooks.runner, bot.ssh.pool"``
  diagnose            ``python -m bot.cli diagnose USER@127.0.0.1:PORT --playbook P --json``
                      on a sim host: a person's whole diagnosis, start-up to exit
  fresh ssh           the same commands, one ``ssh`` process each, one after another
  ControlMaster       master set up, then the same commands at once over it, then closed

Our sources are byte-compiled first (``compileall``, as ``pip install`` does), so no run
pays for compiling them: this machine sets ``PYTHONDONTWRITEBYTECODE=1``, and without
it every process compiled the bot's ~360 modules again (~0.25 s of a ``diagnose``).

Usage: python bench/startup.py [--repeat 5] [--playbook vm_restart] [--json FILE]
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from common import median_time  # noqa: E402
from diagnose import ControlMaster, ssh_commands  # noqa: E402

from bot.sim.sshd import SimHost, start_sim  # noqa: E402

ENV = {**os.environ, "PYTHONPATH": os.pathsep.join(
    [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])}



CPU: dict[str, float] = {}  # median user+sys CPU-seconds of each measured child process


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def median_cpu(name: str, fn: Callable[[], object], repeat: int) -> float:
    """Median wall seconds; the median CPU-seconds go to ``CPU[name]`` (steadier than wall
    on a shared machine: waiting for a core does not count)."""
    walls, cpus = [], []
    for _ in range(repeat):
        cpu0, start = children_cpu(), time.perf_counter()
        fn()
        walls.append(time.perf_counter() - start)
        cpus.append(children_cpu() - cpu0)
    CPU[name] = statistics.median(cpus)
    return statistics.median(walls)


def process(argv: list[str], ok: tuple[int, ...] = (0,)) -> Callable[[], None]:
    def go() -> None:
        rc = subprocess.run(argv, env=ENV, cwd=ROOT, stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            timeout=120).returncode
        if rc not in ok:
            raise SystemExit(f"{argv[:4]} exited {rc}")
    return go


def diagnose_argv(host: SimHost, playbook: str) -> list[str]:
    return [sys.executable, "-m", "bot.cli", "diagnose", f"{host.user}@127.0.0.1:{host.port}",
            "--playbook", playbook, "--ssh-key", str(host.key_path),
            "--known-hosts", str(host.known_hosts_path), "--json"]


def probe_commands(host: SimHost, playbook: str) -> tuple[list[str], dict[str, float]]:
    """The diagnosis's commands, and its own timing: the playbook's ``duration_s`` and
    its GPU sampler's (the sampler's window is the floor of a diagnosis)."""
    out = json.loads(subprocess.run(diagnose_argv(host, playbook), env=ENV, cwd=ROOT,
                                    capture_output=True, text=True, timeout=120,
                                    check=True).stdout)
    sampler = max((p["duration_s"] for p in out["probes"] if p["name"] == "gpus"), default=0.0)
    return [p["command"] for p in out["probes"]], {"playbook_s": float(out["duration_s"]),
                                                   "sampler_s": float(sampler)}


def controlmaster_run(host: SimHost, commands: list[str]) -> None:
    cm = ControlMaster(host)
    cm.start()
    try:
        ssh_commands(host, commands, cm.opts, parallel=True)
    finally:
        cm.stop()


def measure(host: SimHost, playbook: str, repeat: int) -> dict[str, float]:
    py = sys.executable
    commands, timing = probe_commands(host, playbook)
    module = "" if playbook == "auto" else f", playbooks.{playbook}"  # imported when it runs
    imports = ("import bot.commands.diagnose, playbooks.runner, bot.ssh.pool, "
               f"bot.config.settings{module}")
    return {
        "commands": float(len(commands)), **timing,
        "interpreter": median_cpu("interpreter", process([py, "-c", "pass"]), repeat),
        "help": median_cpu("help", process([py, "-m", "bot.cli", "--help"]), repeat),
        "diagnose_imports": median_cpu("diagnose_imports", process([py, "-c", imports]), repeat),
        "diagnose": median_cpu("diagnose", process(diagnose_argv(host, playbook)), repeat),
        "fresh_ssh": median_time(lambda: ssh_commands(host, commands), repeat),
        "controlmaster_parallel": median_time(lambda: controlmaster_run(host, commands), repeat),
    }


def report(r: dict[str, Any]) -> None:
    print(f"whole processes, median seconds ({int(r['commands'])} commands for the ssh rows)")
    for key in ("interpreter", "help", "diagnose_imports", "diagnose", "fresh_ssh",
                "controlmaster_parallel"):
        print(f"  {key:<24}{r[key]:8.3f}")
    print("  CPU-seconds (user+sys, median): " + ", ".join(
        f"{k} {v:.3f}" for k, v in CPU.items()))
    print(f"  --help {r['help']:.3f} s (aim <= 0.3 s); interpreter alone {r['interpreter']:.3f} s")
    print(f"  diagnose {r['diagnose']:.3f} s (aim <= 1.0 s): imports "
          f"{r['diagnose_imports'] - r['interpreter']:.3f} s over the interpreter, the rest "
          f"{r['diagnose'] - r['diagnose_imports']:.3f} s is connect + probes")
    print(f"  one diagnosis's own figures: the playbook {r['playbook_s']:.3f} s, its GPU sampler "
          f"{r['sampler_s']:.3f} s (interpreter + imports + sampler is this host's floor: "
          f"{r['diagnose_imports'] + r['sampler_s']:.3f} s)")
    print(f"  fresh ssh / diagnose {r['fresh_ssh'] / r['diagnose']:.2f}x; "
          f"ControlMaster (setup + parallel) / diagnose "
          f"{r['controlmaster_parallel'] / r['diagnose']:.2f}x")


def compile_sources() -> None:
    """Bytecode for every module of ours, as an installed bot has it."""
    for package in ("bot", "playbooks", "storage"):
        if not compileall.compile_dir(ROOT / package, quiet=1):
            raise SystemExit(f"compileall failed for {package}")


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--playbook", default="vm_restart")
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()
    compile_sources()
    host = start_sim("seed")
    try:
        results: dict[str, Any] = measure(host, args.playbook, args.repeat)
        results["cpu"] = dict(CPU)
    finally:
        host.stop()
    report(results)
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
