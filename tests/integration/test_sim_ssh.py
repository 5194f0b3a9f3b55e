"""Simulated hosts end to end: a real sshd, the real OpenSSH client with strict host key
checking, the fake tools answering from (and changing) the scenario state."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from bot.cli import main as cli_main
from bot.sim.sshd import SimHost, load_sim
from tests.fixtures.sim import SimFactory

VLLM = "vllm-kimi-k25-int4.service"
QUERY = (
    "nvidia-smi --query-gpu=index,memory.used,memory.total,utilization.gpu "
    "--format=csv,noheader,nounits"
)


def ssh(host: SimHost, command: str, timeout: float = 20) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        host.ssh_argv(command), capture_output=True, text=True, timeout=timeout, check=False
    )


def used(host: SimHost) -> set[str]:
    out = ssh(host, "nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits").stdout
    return set(out.split())


def holders(host: SimHost) -> set[str]:
    out = ssh(host, "nvidia-smi --query-compute-apps=pid --format=csv,noheader").stdout
    return set(out.split())


def wait_for(predicate: Callable[[], bool], timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.1)
    return False


def test_plain_ssh_gets_seed_rows_and_header(seed_sim: SimHost) -> None:
    r = ssh(
        seed_sim,
        f"{QUERY}; echo ---; nvidia-smi --query-gpu=index,memory.used,"
        "memory.total,utilization.gpu --format=csv | head -1",
    )
    assert r.returncode == 0, r.stderr
    rows, header = r.stdout.split("---\n")
    assert rows.splitlines() == [f"{i}, 77600, 97887, 0" for i in range(8)]
    assert header == "index, memory.used [MiB], memory.total [MiB], utilization.gpu [%]\n"
    assert seed_sim.known_hosts_line.startswith(f"[127.0.0.1]:{seed_sim.port} ssh-ed25519 ")


def test_stop_frees_memory_and_the_log_records_it(seed_sim: SimHost) -> None:
    r = ssh(seed_sim, f"systemctl stop {VLLM} && {QUERY}")
    assert r.returncode == 0, r.stderr
    assert {line.split(", ")[1] for line in r.stdout.splitlines()} == {"0"}
    log = seed_sim.command_log()
    assert log[0]["command"] == f"systemctl stop {VLLM} && {QUERY}"
    assert [(e["tool"], e["argv"][0]) for e in log if "tool" in e] == [
        ("systemctl", "stop"),
        ("nvidia-smi", "--query-gpu=index,memory.used,memory.total,utilization.gpu"),
    ]
    assert seed_sim.state()["units"][VLLM]["active_state"] == "inactive"


def test_disable_message_and_is_enabled(seed_sim: SimHost) -> None:
    r = ssh(seed_sim, f"systemctl disable {VLLM}; systemctl is-enabled {VLLM}")
    assert r.stderr == f'Removed "/etc/systemd/system/multi-user.target.wants/{VLLM}".\n'
    assert r.stdout == "disabled\n" and r.returncode == 1


def test_kill_respawns_restart_always_unit(seed_sim: SimHost) -> None:
    assert ssh(seed_sim, "kill 440").returncode == 0

    def respawned() -> bool:
        out = ssh(seed_sim, f"systemctl show {VLLM} -p MainPID --value").stdout.strip()
        return out not in ("", "0", "440")

    assert wait_for(respawned)
    pid = ssh(seed_sim, f"systemctl show {VLLM} -p MainPID --value").stdout.strip()
    r = ssh(seed_sim, f"ps -o pid=,args= -p {pid}; ps -p 440 -o pid=; echo rc=$?")
    assert r.stdout.startswith(f"{int(pid):>7} python3 -m vllm.entrypoints") and "rc=1" in r.stdout
    assert used(seed_sim) == {"77600"}


def test_kill_never_reaches_a_real_process(seed_sim: SimHost) -> None:
    sleeper = subprocess.Popen(["sleep", "30"])
    try:
        r = ssh(seed_sim, f"type kill; kill -9 {sleeper.pid}; sudo -n kill {sleeper.pid}")
        assert f"kill is {seed_sim.workdir}/bin/kill" in r.stdout
        assert "No such process" in r.stderr
        assert sleeper.poll() is None
    finally:
        sleeper.kill()
        sleeper.wait()


def test_sh_c_wrapper_never_reaches_a_real_process(seed_sim: SimHost) -> None:
    """The SSH pool wraps commands in ``sh -c``; dash's builtin kill must not run there."""
    sleeper = subprocess.Popen(["sleep", "30"])
    try:
        r = ssh(seed_sim, f"timeout 5 sh -c 'kill -TERM {sleeper.pid}'")
        assert "No such process" in r.stderr
        assert sleeper.poll() is None
    finally:
        sleeper.kill()
        sleeper.wait()


def test_unknown_field_and_unknown_unit(seed_sim: SimHost) -> None:
    r = ssh(seed_sim, "nvidia-smi --query-gpu=index,nope --format=csv")
    assert (r.returncode, r.stdout) == (2, 'Field "nope" is not a valid field to query.\n\n')
    r = ssh(seed_sim, "systemctl stop nope.service")
    assert (r.returncode, r.stderr) == (
        5,
        "Failed to stop nope.service: Unit nope.service not loaded.\n",
    )


def test_sudo_n_runs_the_shim(seed_sim: SimHost) -> None:
    r = ssh(seed_sim, f"sudo -n systemctl stop {VLLM} && sudo -n systemctl is-active {VLLM}")
    assert (r.returncode, r.stdout) == (3, "inactive\n")


def test_stop_delay_outlives_a_client_timeout(sim_factory: SimFactory) -> None:
    host = sim_factory("seed", overrides={"units": {VLLM: {"stop_delay_s": 2.0}}})
    r = ssh(host, f"timeout 0.5 systemctl stop {VLLM}; echo rc=$?")
    assert "rc=124" in r.stdout
    assert used(host) == {"77600"}  # the client gave up while the stop was still under way
    assert wait_for(lambda: used(host) == {"0"}, timeout=6)


def test_respawn_watchdog_retakes_memory(sim_factory: SimFactory) -> None:
    host = sim_factory("respawn")
    before = holders(host)
    ssh(host, f"systemctl stop {VLLM}")  # the watchdog starts it again 0.5 s later
    assert wait_for(lambda: used(host) == {"77600"} and holders(host) - before != set())
    assert len(holders(host)) == 1  # a new PID, the old one gone
    r = ssh(
        host,
        f"systemctl stop gpu-watchdog.service && systemctl stop {VLLM}; sleep 1; "
        f"{QUERY} | cut -d, -f2 | sort -u",
    )
    assert r.stdout.split() == ["0"]


def test_hostile_text_is_shown_but_never_executed(sim_factory: SimFactory) -> None:
    host = sim_factory("hostile")
    canary = Path(host.state()["canary"])
    reads = [
        "ps -eo pid,comm,args",
        "ps aux",
        "systemctl list-units --all",
        "systemctl list-unit-files",
        "crontab -l",
        "lsof +L1",
        "fuser -v /dev/nvidia*",
        "systemctl status 666",
        "nvidia-smi",
        "du -sh /data/*",
        "journalctl -b -n 5",
    ]
    r = ssh(host, "; ".join(reads))
    assert f"$(touch {canary})" in r.stdout and f"`touch {canary}`" in r.stdout
    assert not canary.exists()
    name = next(n for n in host.state()["units"] if n.startswith("gpu-hog-"))
    ssh(host, f"systemctl stop {name}")  # a naive bot: unquoted host text in a command
    assert canary.exists(), "the canary must catch unquoted interpolation"


def test_container_view_hides_pids_but_not_memory(sim_factory: SimFactory) -> None:
    host = sim_factory("seed_container")
    r = ssh(
        host,
        "nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader; "
        "echo ---; fuser /dev/nvidia0",
    )
    apps, pids = r.stdout.split("---\n")
    assert apps == "" and used(host) == {"77600"}
    assert "440" in pids.split()


def test_disk_full_vacuum_frees_space(sim_factory: SimFactory) -> None:
    host = sim_factory("disk_full")
    r = ssh(host, "df -P / | tail -1; journalctl --vacuum-size=500M; df -P / | tail -1")
    before, after = (line.split()[4] for line in r.stdout.splitlines())
    assert before == "100%" and int(after.rstrip("%")) < 90
    assert "Vacuuming done, freed" in r.stderr


def test_cli_up_and_down_detached(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from bot.core.procs import free_port

    port = free_port()
    assert cli_main(["sim", "up", "seed", "--port", str(port), "--dir", str(tmp_path)]) == 0
    printed = capsys.readouterr().out
    host = load_sim(tmp_path)
    try:
        assert f"root@127.0.0.1:{port}" in printed and "known_hosts line: [127.0.0.1]" in printed
        assert ssh(host, QUERY).stdout.count("77600") == 8
        assert cli_main(["sim", "up", "seed", "--port", str(port), "--dir", str(tmp_path)]) == 2
    finally:
        assert cli_main(["sim", "down", "--dir", str(tmp_path)]) == 0
    assert not host.alive()
    assert ssh(host, "true", timeout=10).returncode == 255


def test_bad_scenario_file_names_file_and_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("host: gpu-09\ngpus:\n  - count: many\n")
    assert cli_main(["sim", "up", str(bad), "--dir", str(tmp_path / "h")]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {bad}: key 'gpus.0.count'") and err.count("\n") == 1
