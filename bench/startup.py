"""Start-up, measured as whole processes from outside, side by side in one run.

  interpreter         ``python -c pass``: the floor every Python CLI pays
  --help              ``python -m bot.cli --help`` (the ``incident-bot`` entry point's code)
  diagnose imports    ``python -c "import bot.commands.diagnose, playbooks.runner, bot.ssh.pool"``
                      (with ``--config`` the settings come too)
  diagnose            ``python -m bot.cli diagnose USER@127.0.0.1:PORT --playbook P --json``
                      on a sim host: a person's whole diagnosis, start-up to exit
  diagnose via serve  ``python -m bot.cli diagnose gpu-01 --playbook P --json`` with
                      ``INCIDENT_BOT_URL`` and ``INCIDENT_BOT_DIAGNOSE_TOKEN`` set: asked of a
                      running ``serve`` (a real process, its pool warmed by one diagnosis)
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
import contextlib
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from common import median_time  # noqa: E402
from diagnose import ControlMaster, ssh_commands  # noqa: E402

from bot.core.procs import free_port, stop_child  # noqa: E402
from bot.rig.localredis import start_local_redis  # noqa: E402
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


def via_serve(host: SimHost, playbook: str, repeat: int) -> dict[str, float]:
    """The same diagnosis asked of a running serve; and the diagnosis inside serve (its
    playbook's own ``duration_s``), the part no client can remove."""
    with tempfile.TemporaryDirectory(prefix="ib-startup-serve-") as tmp, \
            running_serve(host, Path(tmp)) as url:
        wall = median_cpu("diagnose_via_serve", process(via_serve_argv(playbook),
                                                        env=serve_env(url)), repeat)
        inside = []
        for _ in range(repeat):
            out = subprocess.run(via_serve_argv(playbook), env={**ENV, **serve_env(url)},
                                 cwd=ROOT, capture_output=True, text=True, timeout=120,
                                 check=True).stdout
            inside.append(float(json.loads(out)["duration_s"]))
    return {"diagnose_via_serve": wall, "serve_playbook_s": statistics.median(inside)}


def process(argv: list[str], ok: tuple[int, ...] = (0,),
            env: dict[str, str] | None = None) -> Callable[[], None]:
    def go() -> None:
        rc = subprocess.run(argv, env={**ENV, **(env or {})}, cwd=ROOT, stdin=subprocess.DEVNULL,
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


DIAG_TOKEN = "bench-diagnose-token"


@contextlib.contextmanager
def running_serve(host: SimHost, workdir: Path) -> Iterator[str]:
    """``incident-bot serve`` (a real process, terminal chat, no scheduler) with the sim
    host as ``gpu-01``, its pool warmed by one diagnosis; yields its URL."""
    redis = start_local_redis(workdir / "redis")
    port = free_port()
    config = workdir / "serve.yaml"
    config.write_text(json.dumps({
        "chat_backend": "terminal", "http": {"host": "127.0.0.1", "port": port},
        "hosts": {"gpu-01": {"ssh": host.target, "key": str(host.key_path),
                             "known_hosts": str(host.known_hosts_path)}},
        "extra": {"scheduler": {"enabled": False}}}))
    env = {**ENV, "REDIS_URL": redis.url, "INCIDENT_BOT_DIAGNOSE_TOKEN": DIAG_TOKEN}
    with (workdir / "serve.log").open("wb") as log:
        proc = subprocess.Popen([sys.executable, "-m", "bot.cli", "serve", "--config",
                                 str(config)], env=env, cwd=ROOT, stdout=log, stderr=log,
                                stdin=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while not _answers(f"{url}/readyz"):
            if proc.poll() is not None or time.monotonic() > deadline:
                log = (workdir / "serve.log").read_text()[-800:]
                raise SystemExit(f"serve did not start: {log}")
            time.sleep(0.1)
        process(via_serve_argv("vram_idle"), env=serve_env(url))()  # the pool connects once
        yield url
    finally:
        stop_child(proc)
        redis.stop()


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=1) as r:
            return bool(r.status == 200)
    except OSError:
        return False


def serve_env(url: str) -> dict[str, str]:
    return {"INCIDENT_BOT_URL": url, "INCIDENT_BOT_DIAGNOSE_TOKEN": DIAG_TOKEN}


def via_serve_argv(playbook: str) -> list[str]:
    return [sys.executable, "-m", "bot.cli", "diagnose", "gpu-01", "--playbook", playbook,
            "--json"]


def measure(host: SimHost, playbook: str, repeat: int) -> dict[str, float]:
    py = sys.executable
    commands, timing = probe_commands(host, playbook)
    module = "" if playbook == "auto" else f", playbooks.{playbook}"  # imported when it runs
    # what the ad-hoc path loads (an address, a key, a known_hosts file: no settings)
    imports = f"import bot.commands.diagnose, playbooks.runner, bot.ssh.pool{module}"
    return {
        "commands": float(len(commands)), **timing,
        "interpreter": median_cpu("interpreter", process([py, "-c", "pass"]), repeat),
        "help": median_cpu("help", process([py, "-m", "bot.cli", "--help"]), repeat),
        "diagnose_imports": median_cpu("diagnose_imports", process([py, "-c", imports]), repeat),
        "diagnose": median_cpu("diagnose", process(diagnose_argv(host, playbook)), repeat),
        **via_serve(host, playbook, repeat),
        "fresh_ssh": median_time(lambda: ssh_commands(host, commands), repeat),
        "controlmaster_parallel": median_time(lambda: controlmaster_run(host, commands), repeat),
    }


def report(r: dict[str, Any]) -> None:
    print(f"whole processes, median seconds ({int(r['commands'])} commands for the ssh rows)")
    for key in ("interpreter", "help", "diagnose_imports", "diagnose", "diagnose_via_serve",
                "fresh_ssh", "controlmaster_parallel"):
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
    print(f"  diagnose via serve {r['diagnose_via_serve']:.3f} s (aim <= 0.5 s): the diagnosis "
          f"inside serve {r['serve_playbook_s']:.3f} s, the rest "
          f"{r['diagnose_via_serve'] - r['serve_playbook_s']:.3f} s is the process and HTTP")
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
