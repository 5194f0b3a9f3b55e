"""ParamikoPool against a real OpenSSH sshd (a simulated host) on 127.0.0.1."""

from __future__ import annotations

import contextlib
import dataclasses
import random
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import paramiko
import pytest

from bot.core.procs import free_port
from bot.sim.sshd import SimHost
from bot.ssh.base import AuthFailed, Command, HostKeyMismatch, HostUnreachable, SSHTarget
from bot.ssh.pool import ParamikoPool
from bot.ssh.settings import SSHSettings
from tests.fixtures.sim import SimFactory


@pytest.fixture(scope="module")
def host(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimHost]:
    """One seed host shared by the module (tests that change the server make their own)."""
    from bot.sim.sshd import start_sim

    sim = start_sim("seed", workdir=tmp_path_factory.mktemp("pool-sim"))
    yield sim
    sim.stop()


@pytest.fixture
def pool() -> Iterator[ParamikoPool]:
    p = ParamikoPool(SSHSettings(connect_timeout_s=2.0))
    yield p
    p.close()


def cmd(text: str, timeout: float = 10.0, name: str = "t") -> Command:
    return Command(name, text, timeout)


def test_runs_command_with_exit_status_and_both_streams(pool: ParamikoPool, host: SimHost) -> None:
    r = pool.run(host.ssh_target(), cmd("echo out; echo err >&2; exit 3"))
    assert (r.exit_status, r.stdout, r.stderr) == (3, "out\n", "err\n")
    assert not r.timed_out and not r.truncated and r.error is None
    assert r.command == "echo out; echo err >&2; exit 3"  # the probe's text, not the wrapper


def test_one_connection_reused(pool: ParamikoPool, host: SimHost) -> None:
    target = host.ssh_target()
    ports = {pool.run(target, cmd("echo $SSH_CLIENT")).stdout.split()[1] for _ in range(4)}
    ports |= {r.stdout.split()[1] for r in pool.run_many(target, [cmd("echo $SSH_CLIENT")] * 6)}
    assert len(ports) == 1  # every channel came from one client TCP port
    assert pool.connection_count() == 1


def test_run_many_is_parallel_and_ordered(pool: ParamikoPool, host: SimHost) -> None:
    start = time.monotonic()
    results = pool.run_many(host.ssh_target(), [cmd(f"sleep 1; echo {i}") for i in range(8)])
    wall = time.monotonic() - start
    assert [r.stdout.strip() for r in results] == [str(i) for i in range(8)]
    assert wall < 6.0, f"8 x sleep 1 took {wall:.1f}s: not parallel"


def test_parallel_channels_capped_by_max_sessions(host: SimHost) -> None:
    with ParamikoPool(SSHSettings(max_sessions=3)) as pool:
        probe = cmd("date +%s.%N; sleep 0.6; date +%s.%N")
        results = pool.run_many(host.ssh_target(), [probe] * 7)
    spans = [tuple(float(x) for x in r.stdout.split()) for r in results]
    peak = max(sum(1 for a, b in spans if a <= t < b) for t, _ in spans)
    assert 2 <= peak <= 3, spans


def test_server_session_limit_below_ours_is_retried(sim_factory: SimFactory) -> None:
    sim = sim_factory("seed", overrides={"sshd": {"max_sessions": 2}})
    with ParamikoPool(SSHSettings(max_sessions=8)) as pool:
        results = pool.run_many(sim.ssh_target(), [cmd(f"sleep 0.3; echo {i}") for i in range(6)])
    assert [r.stdout.strip() for r in results] == [str(i) for i in range(6)]
    assert all(r.ok for r in results)


def _target(host: SimHost, **kw: Any) -> SSHTarget:
    return dataclasses.replace(host.ssh_target(), **kw)


def test_closed_port_is_unreachable(host: SimHost) -> None:
    with (ParamikoPool(SSHSettings(connect_timeout_s=1.0)) as pool,
          pytest.raises(HostUnreachable, match="refused")):
        pool.run(_target(host, port=free_port()), cmd("true"))


@pytest.fixture
def blackhole() -> Iterator[int]:
    """A listening socket that accepts and never sends an SSH banner."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(16)
    yield srv.getsockname()[1]
    srv.close()


def test_blackhole_is_unreachable_within_deadline(host: SimHost, blackhole: int) -> None:
    with ParamikoPool(SSHSettings(connect_timeout_s=1.0)) as pool:
        start = time.monotonic()
        with pytest.raises(HostUnreachable) as info:
            pool.run(_target(host, port=blackhole), cmd("true"))
        took = time.monotonic() - start
    assert 0.8 <= took < 2.0, took
    assert str(blackhole) in str(info.value)


def test_concurrent_callers_share_one_connect_attempt(host: SimHost, blackhole: int) -> None:
    errors: list[BaseException] = []
    with ParamikoPool(SSHSettings(connect_timeout_s=1.0)) as pool:

        def call() -> None:
            try:
                pool.run(_target(host, port=blackhole), cmd("true"))
            except HostUnreachable as exc:
                errors.append(exc)

        threads = [threading.Thread(target=call) for _ in range(6)]
        start = time.monotonic()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        took = time.monotonic() - start
    assert len(errors) == 6
    assert took < 2.5, f"6 callers took {took:.1f}s: each paid the deadline"


def test_changed_host_key_is_refused_and_not_added(host: SimHost, tmp_path: Path) -> None:
    other = paramiko.Ed25519Key.from_private_key_file(str(host.key_path))  # any other key
    known = tmp_path / "known_hosts"
    known.write_text(f"[127.0.0.1]:{host.port} {other.get_name()} {other.get_base64()}\n")
    before = known.read_text()
    with ParamikoPool() as pool, pytest.raises(HostKeyMismatch, match="host key mismatch for"):
        pool.run(_target(host, known_hosts=str(known)), cmd("touch /tmp/never"))
    assert known.read_text() == before
    assert not any("never" in str(e) for e in host.command_log())


def test_unknown_host_key_is_refused(host: SimHost, tmp_path: Path) -> None:
    empty = tmp_path / "empty_known_hosts"
    empty.write_text("")
    with ParamikoPool() as pool, pytest.raises(HostKeyMismatch, match="not in known_hosts"):
        pool.run(_target(host, known_hosts=str(empty)), cmd("true"))
    assert empty.read_text() == ""


def test_wrong_key_fails_auth(host: SimHost, tmp_path: Path) -> None:
    path = tmp_path / "other_key"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path)], check=True)
    with ParamikoPool() as pool, pytest.raises(AuthFailed):
        pool.run(_target(host, key_path=str(path)), cmd("true"))


def _pgrep(pattern: str) -> list[str]:
    out = subprocess.run(["pgrep", "-f", pattern], capture_output=True, text=True)
    return out.stdout.split()


def _wait_gone(pattern: str, within: float) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if not _pgrep(pattern):
            return True
        time.sleep(0.1)
    return False


def test_hanging_command_is_killed_on_the_host(pool: ParamikoPool, host: SimHost) -> None:
    marker = f"600.{random.randrange(10**8):08d}"
    seen: list[list[str]] = []
    watcher = threading.Timer(0.7, lambda: seen.append(_pgrep(f"sleep {marker}")))
    watcher.start()
    start = time.monotonic()
    r = pool.run(host.ssh_target(), cmd(f"sleep {marker}", timeout=1.5))
    took = time.monotonic() - start
    watcher.join()
    assert seen and seen[0], "the sleep never ran on the host"
    assert r.timed_out and r.exit_status in (124, 137, None)
    assert took < 1.5 + 4.0
    assert _wait_gone(f"sleep {marker}", 3.0), "sleep still running after the deadline"


def test_host_side_deadline_holds_when_client_goes_away(host: SimHost) -> None:
    marker = f"600.{random.randrange(10**8):08d}"
    pool = ParamikoPool()
    thread = threading.Thread(target=lambda: _swallow(pool, host, marker), daemon=True)
    thread.start()
    time.sleep(0.8)
    assert _pgrep(f"sleep {marker}")
    pool.close()  # connection gone; only the remote `timeout` can end it now
    assert _wait_gone(f"sleep {marker}", 2.0 + 2.0 + 3.0)


def _swallow(pool: ParamikoPool, host: SimHost, marker: str) -> None:
    with contextlib.suppress(Exception):  # the pool is closed under it on purpose
        pool.run(host.ssh_target(), cmd(f"sleep {marker}", timeout=2.0))


def test_five_megabytes_on_both_streams_do_not_deadlock(pool: ParamikoPool, host: SimHost) -> None:
    big = "head -c 5000000 /dev/zero | tr '\\0' x"
    r = pool.run(host.ssh_target(), cmd(f"{big} & {big} >&2; wait; echo done >&2", timeout=20))
    assert r.exit_status == 0 and not r.timed_out
    assert r.truncated
    assert len(r.stdout) == len(r.stderr) == pool.settings.max_output_bytes
    assert set(r.stdout) == {"x"}


def test_small_output_cap_marks_truncated(host: SimHost) -> None:
    with ParamikoPool(SSHSettings(max_output_bytes=100)) as pool:
        r = pool.run(host.ssh_target(), cmd("seq 1000"))
    assert r.truncated and len(r.stdout) == 100 and r.exit_status == 0


def test_no_sudo_wrapper_on_a_sudo_host(pool: ParamikoPool, host: SimHost) -> None:
    """``sudo: true`` is for the actions' own commands: a probe is sent as it is (the
    shipped sudoers refuse ``sudo -n timeout ...``; read-only probes need no root)."""
    pool.run(_target(host, sudo=True), cmd("true", name="sudo-check"))
    commands = [e["command"] for e in host.command_log() if e.get("command")]
    assert commands[-1] == "timeout -k 2 10 sh -c true"


def test_idle_connection_expires_and_reconnects(host: SimHost) -> None:
    with ParamikoPool(SSHSettings(idle_expiry_s=0.3)) as pool:
        assert pool.run(host.ssh_target(), cmd("echo 1")).ok
        assert pool.connection_count() == 1
        deadline = time.monotonic() + 5
        while pool.connection_count() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert pool.connection_count() == 0
        assert pool.run(host.ssh_target(), cmd("echo 2")).stdout == "2\n"


def test_dead_transport_is_replaced(pool: ParamikoPool, host: SimHost) -> None:
    target = host.ssh_target()
    first = pool.run(target, cmd("echo $SSH_CLIENT")).stdout.split()[1]
    for conn in list(pool._conns.values()):  # simulate a dropped connection
        conn.transport.sock.close()
    time.sleep(0.2)
    r = pool.run(target, cmd("echo $SSH_CLIENT"))
    assert r.ok and r.stdout.split()[1] != first


def test_thread_safe_under_concurrent_callers(pool: ParamikoPool, host: SimHost) -> None:
    target = host.ssh_target()
    outputs: dict[int, list[str]] = {}

    def worker(n: int) -> None:
        outputs[n] = [
            r.stdout.strip()
            for r in pool.run_many(target, [cmd(f"echo {n}-{i}") for i in range(5)])
        ]

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert outputs == {n: [f"{n}-{i}" for i in range(5)] for n in range(4)}
    assert pool.connection_count() == 1


def test_endless_output_stops_at_the_deadline(pool: ParamikoPool, host: SimHost) -> None:
    r = pool.run(host.ssh_target(), cmd("yes", timeout=1.0))  # without a deadline: forever
    assert r.timed_out and r.truncated


def test_pooled_transport_thread_ends_soon_after_close(host: SimHost) -> None:
    """The transport thread checks for close once a second (not paramiko's ten times:
    idle pools paid for it); a closed pool still leaves no thread behind for long."""
    pool = ParamikoPool(SSHSettings(connect_timeout_s=2.0))
    assert pool.run(host.ssh_target(), cmd("true")).ok
    (conn,) = pool._conns.values()
    assert conn.transport.sock.gettimeout() == 1.0
    pool.close()
    conn.transport.join(3.0)
    assert not conn.transport.is_alive()


def test_an_aead_cipher_is_negotiated(pool: ParamikoPool, host: SimHost) -> None:
    """AES-GCM: integrity from the cipher's tag, not a MAC paramiko compares in Python."""
    assert pool.run(host.ssh_target(), cmd("true")).ok
    (conn,) = pool._conns.values()
    assert conn.transport.local_cipher == conn.transport.remote_cipher == "aes256-gcm@openssh.com"
