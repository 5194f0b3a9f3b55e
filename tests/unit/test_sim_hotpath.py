"""What one command on a simulated host costs to start: the modules it imports, the log line
it writes and the state it reads, checked on a real state file in tmp_path."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import bot
from bot.sim.build import build_state
from bot.sim.log import read_log, to_json
from bot.sim.scenario import load_scenario
from bot.sim.shims import write_shims
from bot.sim.state import MIRROR_FILE, STATE_FILE, SimCall, load_state, write_state
from bot.sim.tools import systemctl

ROOT = str(Path(bot.__file__).resolve().parent.parent)
# json and typing each pull ``re`` (~20 ms a command); xml.sax pulled urllib and http
HEAVY = ("json", "re", "typing", "contextlib", "xml.sax.saxutils", "fnmatch", "pydantic", "yaml")
# what a diagnosis asks a host, none of which changes it
READ_ONLY = [
    ["nvidia-smi", "--query-gpu=index,memory.used,memory.total,utilization.gpu",
     "--format=csv,noheader,nounits"],
    ["nvidia-smi", "--query-compute-apps=pid,used_memory,gpu_uuid", "--format=csv"],
    ["nvidia-smi"], ["nvidia-smi", "-q", "-x"], ["nvidia-smi", "-L"],
    ["ps", "-ww", "-eo", "pid,ppid,user,lstart,etimes,rss,args"],
    ["systemctl", "show", "-p", "Id,ActiveState,MainPID", "vllm-kimi-k25-int4.service"],
    ["systemctl", "list-units", "--type=service", "--all", "--plain", "--no-legend"],
    ["systemctl", "status", "vllm-kimi-k25-int4.service"],
    ["uptime", "-s"], ["crontab", "-l"], ["df", "-h"], ["du", "-sh", "/data"], ["free", "-m"],
    ["lsof", "-n", "/dev/nvidia0"], ["fuser", "-v", "/dev/nvidia0"], ["who", "-b"],
    ["journalctl", "--list-boots", "--no-pager"], ["dmesg"], ["hostname"],
    ["docker", "ps", "-aq", "--no-trunc"],
    ["nvidia-smi", "--query-gpu=index,pci.bus_id,pcie.link.gen.current,pcie.link.gen.max,"
     "pcie.link.width.current,pcie.link.width.max,temperature.gpu,utilization.gpu",
     "--format=csv,noheader,nounits"],
    ["nvidia-smi", "nvlink", "-e"],
]


@pytest.fixture
def host(tmp_path: Path) -> Path:
    write_state(tmp_path, build_state(load_scenario("seed")))
    return tmp_path


def run_isolated(code: str) -> subprocess.CompletedProcess[str]:
    """Python started the way a tool shim starts it (``bot.sim.shims``)."""
    prelude = f"import sys; sys.path.insert(0, {ROOT!r})\n"
    return subprocess.run([sys.executable, "-I", "-S", "-X", "utf8", "-c", prelude + code],
                          capture_output=True, text=True, check=False, cwd="/")


@pytest.mark.parametrize("argv", READ_ONLY, ids=lambda a: " ".join(a)[:40])
def test_read_only_command_imports_nothing_heavy(host: Path, argv: list[str]) -> None:
    code = (
        "from bot.sim.run import main\n"
        f"code = main([{str(host)!r}, *{argv!r}])\n"
        f"heavy = sorted(set({HEAVY!r}) & set(sys.modules))\n"
        "sys.stdout.flush()\n"
        "sys.stderr.write(f'EXIT {code} HEAVY {heavy}\\n')\n"
    )
    r = run_isolated(code)
    assert r.stderr.strip().endswith("HEAVY []"), r.stderr
    # seed: root has no crontab, and no containers, so no docker
    expected = {"crontab": 1, "docker": 127}.get(argv[0], 0)
    assert f"EXIT {expected} " in r.stderr, r.stderr
    printed = r.stdout + r.stderr.rsplit("EXIT", 1)[0]  # fuser -v and crontab use stderr
    assert printed.strip(), "a read-only command that printed nothing"


def test_shim_runs_isolated_from_the_environment(host: Path, tmp_path_factory:
                                                 pytest.TempPathFactory) -> None:
    """``-I``: a PYTHONPATH with its own ``bot`` package is never imported by the shim."""
    bad = tmp_path_factory.mktemp("bad")
    (bad / "bot").mkdir()
    (bad / "bot" / "__init__.py").write_text("raise SystemExit('wrong bot imported')\n")
    bindir = write_shims(host)
    env = {**os.environ, "PYTHONPATH": str(bad), "PYTHONSTARTUP": str(bad / "x.py")}
    r = subprocess.run([str(bindir / "nvidia-smi"), "-L"], capture_output=True, text=True,
                       env=env, check=False, cwd=str(bad))
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("GPU 0: ")


@pytest.mark.parametrize("entry", [
    {"ts": 1790000000.123456, "command": "nvidia-smi -q -x"},
    {"ts": 1.0, "command": None},
    {"ts": 2.5e-7, "tool": "ps", "argv": ["-eo", "pid,args", ""]},
    {"ts": 3.0, "command": 'a"b\\c\n\r\t\b\f\x00\x1f\x7f é \u2028 $(touch x) `id`'},
    {"ts": 10**20, "ok": True, "no": False, "nested": {"k": [1, 2.5, "x"]}},
])
def test_log_line_is_exactly_what_json_writes(entry: dict[str, object]) -> None:
    assert to_json(entry) == json.dumps(entry, ensure_ascii=False)


def test_log_lines_read_back(host: Path) -> None:
    r = run_isolated(f"from bot.sim.run import main\nmain([{str(host)!r}, 'hostname'])\n")
    assert r.returncode == 0, r.stderr
    assert [e["argv"] for e in read_log(host) if e.get("tool") == "hostname"] == [[]]


def test_read_takes_no_lock_and_writes_nothing(host: Path) -> None:
    before = os.stat(host / STATE_FILE)
    state = SimCall(host).read()
    after = os.stat(host / STATE_FILE)
    assert state["host"] == "gpu-01"
    assert (before.st_ino, before.st_mtime_ns) == (after.st_ino, after.st_mtime_ns)
    assert not (host / "state.lock").exists()


def test_due_event_is_applied_and_written_by_a_reader(host: Path) -> None:
    ctx = SimCall(host)
    with ctx.mutate() as state:
        state["pending"].append({"at": 0.0, "op": "stop", "unit": "vllm-kimi-k25-int4.service"})
    assert load_state(host)["pending"], "the queued event is on disk"
    assert SimCall(host).read()["units"]["vllm-kimi-k25-int4.service"]["active_state"] == \
        "inactive"
    assert load_state(host)["pending"] == []
    assert json.loads((host / MIRROR_FILE).read_text())["pending"] == []


def test_a_failed_mutation_writes_nothing(host: Path) -> None:
    before = (host / STATE_FILE).read_bytes()
    with pytest.raises(RuntimeError), SimCall(host).mutate() as state:
        state["host"] = "changed"
        raise RuntimeError("the tool failed half way")
    assert (host / STATE_FILE).read_bytes() == before


def test_written_state_is_json_shaped(host: Path) -> None:
    """A writer's tuples and int keys come back as JSON would give them back."""
    with SimCall(host).mutate() as state:
        state["extra"] = {"t": (1, 2), 3: "x"}
    assert load_state(host)["extra"] == {"t": [1, 2], "3": "x"}


def test_a_writing_tool_still_changes_the_state(host: Path) -> None:
    out = io.StringIO()
    ctx = SimCall(host, out=out, err=io.StringIO())
    assert systemctl.main(["stop", "vllm-kimi-k25-int4.service"], ctx) == 0
    unit = load_state(host)["units"]["vllm-kimi-k25-int4.service"]
    assert unit["active_state"] == "inactive"


def test_sim_started_from_another_checkout_runs_this_one(
        sim_factory: Any, tmp_path_factory: pytest.TempPathFactory,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """sshd's sandbox wrapper and the tools ignore the current directory (``-m`` put it
    first on ``sys.path``: started from another checkout, its code ran)."""
    other = tmp_path_factory.mktemp("other-checkout")
    (other / "bot").mkdir()
    (other / "bot" / "__init__.py").write_text("raise SystemExit('wrong bot imported')\n")
    monkeypatch.chdir(other)
    host = sim_factory("seed")
    r = subprocess.run(host.ssh_argv("nvidia-smi -L"), capture_output=True, text=True,
                       timeout=30, check=False)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("GPU 0: ")
