"""Start, find and stop a simulated host: a private OpenSSH ``sshd`` on 127.0.0.1 whose
sessions are forced through ``bin/sim-session`` (log the command, put the fake tools
first on PATH, run it under bash). Torn down by PID only, after checking the PID is ours.
"""

from __future__ import annotations

import atexit
import contextlib
import getpass
import json
import os
import shlex
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bot.core.errors import UserError
from bot.core.procs import stop_child
from bot.sim.keys import write_host_key, write_keypair
from bot.sim.log import read_log
from bot.sim.sandbox import MARKER, wrap
from bot.sim.shims import write_shims
from bot.sim.state import write_state

if TYPE_CHECKING:
    from bot.ssh.base import SSHTarget

SSHD = "/usr/sbin/sshd"
META = "sim.json"
_LIVE: dict[int, SimHost] = {}  # started here and not detached: stopped at exit


@dataclass
class SimHost:
    name: str
    port: int
    workdir: Path
    key_path: Path
    known_hosts_path: Path
    pid: int = 0
    user: str = "root"
    _proc: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    @property
    def target(self) -> str:
        return f"{self.user}@127.0.0.1:{self.port}"

    @property
    def known_hosts_line(self) -> str:
        return self.known_hosts_path.read_text().strip()

    def ssh_target(self) -> SSHTarget:
        from bot.ssh.base import SSHTarget

        return SSHTarget(name=self.name, host="127.0.0.1", port=self.port, user=self.user,
                         key_path=str(self.key_path), known_hosts=str(self.known_hosts_path))

    def ssh_argv(self, command: str) -> list[str]:
        """A plain OpenSSH client command line for this host (strict host key checking)."""
        return ["ssh", "-F", "/dev/null", "-i", str(self.key_path), "-o", "IdentitiesOnly=yes",
                "-o", f"UserKnownHostsFile={self.known_hosts_path}",
                "-o", "StrictHostKeyChecking=yes", "-o", "BatchMode=yes", "-o", "LogLevel=ERROR",
                "-p", str(self.port), f"{self.user}@127.0.0.1", command]

    def command_log(self) -> list[dict[str, Any]]:
        """Every session command (``command``) and tool call (``tool``, ``argv``), in order."""
        return read_log(self.workdir)

    def state(self) -> dict[str, Any]:
        """The current state, with due events (respawns, delayed stops) applied."""
        from bot.sim.state import SimCall

        return SimCall(self.workdir).read()

    def alive(self) -> bool:
        return self.pid > 0 and _is_our_sshd(self.pid, self.workdir)

    # --- faults at the moment of a click (issue 35): down, frozen, another host key ------
    def sessions(self) -> list[int]:
        """The PIDs of sshd's per-connection children and everything under them (a
        client's open connection lives there, not in the listener)."""
        return _descendants(self.pid) if self.pid > 0 else []

    def freeze(self) -> None:
        """SIGSTOP the listener and every session: connected clients get no answer."""
        for pid in [self.pid, *self.sessions()]:
            _signal(pid, signal.SIGSTOP)

    def thaw(self) -> None:
        for pid in [self.pid, *self.sessions()]:
            _signal(pid, signal.SIGCONT)

    def down(self) -> None:
        """sshd and every open session gone (connection refused from now on); the state
        and the keys stay for ``up``."""
        sessions = self.sessions()
        self.stop()
        for pid in sessions:
            _signal(pid, signal.SIGKILL)

    def up(self, timeout_s: float = 10.0) -> None:
        """sshd again on the same port, with whatever host key the workdir holds."""
        proc = _launch(self.workdir, False)
        if not _wait_listening(proc, self.workdir, timeout_s):
            _terminate_child(proc)
            raise UserError(f"sim sshd did not start again: {_log_tail(self.workdir)}")
        self.pid, self._proc = proc.pid, proc
        _LIVE[id(self)] = self

    def replace_host_key(self) -> bytes:
        """Another machine at this address: sshd restarted with a new host key (the bot's
        known_hosts keeps the old one). Returns the old key for ``restore_host_key``."""
        old = (self.workdir / "host_ed25519").read_bytes()
        self.down()
        write_host_key(self.workdir)
        self.up()
        return old

    def restore_host_key(self, old: bytes) -> None:
        self.down()
        key = self.workdir / "host_ed25519"
        key.unlink(missing_ok=True)
        fd = os.open(key, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as fh:
            fh.write(old)
        self.up()

    def reset(self, overrides: dict[str, Any] | None = None) -> None:
        """The scenario's state again, as at start (the sshd and its keys stay)."""
        from bot.sim.build import build_state
        from bot.sim.scenario import load_scenario

        meta = json.loads((self.workdir / META).read_text())
        sc = load_scenario(meta["scenario"], overrides, canary=str(self.workdir / "CANARY"))
        before = self.state()
        state = build_state(sc)
        for key in ("sshd", "canary", "binds"):
            state[key] = before[key]
        write_state(self.workdir, state)

    def stop(self) -> None:
        """Stop sshd by PID (idempotent); open sessions end when their clients go."""
        _LIVE.pop(id(self), None)
        if self.pid <= 0:
            return
        if self._proc is not None:
            _terminate_child(self._proc)
        elif _is_our_sshd(self.pid, self.workdir):
            _terminate_pid(self.pid, self.workdir)
        self.pid = 0


def _signal(pid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, sig)


def _descendants(root: int) -> list[int]:
    """Every process under ``root`` (from /proc: pid → parent pid)."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        parents[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
    found, frontier = [], {root}
    while frontier:
        frontier = {pid for pid, parent in parents.items() if parent in frontier}
        found += sorted(frontier)
    return found


def _is_our_sshd(pid: int, workdir: Path) -> bool:
    """sshd rewrites its title ("sshd: ... -f CFG [listener] ..."), so match a substring."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
    is_sshd = cmdline.startswith((b"sshd", SSHD.encode()))
    return is_sshd and f"-f {workdir / 'sshd_config'}".encode() in cmdline.replace(b"\0", b" ")


def _terminate_child(proc: subprocess.Popen[bytes]) -> None:
    stop_child(proc, grace_s=3)


def _terminate_pid(pid: int, workdir: Path) -> None:
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + 3
    while time.monotonic() < deadline and _is_our_sshd(pid, workdir):
        time.sleep(0.02)
    if _is_our_sshd(pid, workdir):
        os.kill(pid, signal.SIGKILL)


def sshd_config(workdir: Path, port: int, user: str, sshd: dict[str, Any]) -> str:
    q = shlex.quote
    lines = [
        "ListenAddress 127.0.0.1", f"Port {port}", f"HostKey {workdir / 'host_ed25519'}",
        f"AuthorizedKeysFile {workdir / 'authorized_keys'}", f"PidFile {workdir / 'sshd.pid'}",
        "UsePAM no", "StrictModes no", "PasswordAuthentication no",
        "KbdInteractiveAuthentication no", "PubkeyAuthentication yes",
        "PermitRootLogin prohibit-password", f"AllowUsers {user}",
        f"MaxSessions {int(sshd['max_sessions'])}", f"MaxStartups {sshd['max_startups']}",
        # sntrup761 key exchange costs ~100 ms per connection here; a sim needs no PQ KEX
        *(["KexAlgorithms -sntrup761x25519-sha512*"] if sshd.get("fast_kex", True)
          else []),
        "LogLevel ERROR", "UseDNS no",
        "PrintMotd no", "PrintLastLog no", "X11Forwarding no",
        "AllowTcpForwarding no", "AllowAgentForwarding no", "PermitUserEnvironment no",
        # bash started by sshd with SHLVL unset sources ~/.bashrc (Debian's
        # SSH_SOURCE_BASHRC): slow, and it would put the real host's PATH first.
        "SetEnv SHLVL=1",
        f"ForceCommand {q(str(workdir / 'bin' / 'sim-session'))}",
    ]
    return "\n".join(lines) + "\n"


def _free_port() -> int:
    from bot.core.procs import free_port

    return free_port()


def _prepare(workdir: Path, state: dict[str, Any], port: int, user: str,
             env: dict[str, str] | None = None) -> tuple[Path, Path]:
    workdir.mkdir(parents=True, exist_ok=True)
    key_path, host_pub = write_keypair(workdir)
    known = workdir / "known_hosts"
    known.write_text(f"[127.0.0.1]:{port} {host_pub}\n")
    write_state(workdir, state)
    (workdir / "commands.jsonl").write_text("")
    (workdir / MARKER).unlink(missing_ok=True)
    commands = state.get("commands") or {}
    stubs = {line.split(" ", 1)[0] for c in commands.values() for line in [*c["then"]]}
    write_shims(workdir, env, stubs | {line.split(" ", 1)[0] for line in commands})
    (workdir / "sshd_config").write_text(sshd_config(workdir, port, user, state["sshd"]))
    return key_path, known


def _launch(workdir: Path, detach: bool) -> subprocess.Popen[bytes]:
    with contextlib.suppress(OSError):  # not root: sshd.log says what sshd needs
        Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)  # privilege-separation directory
    (workdir / "sshd.pid").unlink(missing_ok=True)
    with open(workdir / "sshd.log", "ab") as log:
        return subprocess.Popen(
            wrap([SSHD, "-D", "-e", "-f", str(workdir / "sshd_config")], workdir),
            stdin=subprocess.DEVNULL,
            stdout=log, stderr=log, start_new_session=detach, close_fds=True)


def _wait_listening(proc: subprocess.Popen[bytes], workdir: Path, timeout_s: float) -> bool:
    """sshd writes its PidFile once the listening socket is bound."""
    pidfile = workdir / "sshd.pid"
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            return False
        if pidfile.exists() and pidfile.read_text().strip():
            return True
        time.sleep(0.003)
    return False


def start_sim(scenario: str | Path, *, port: int | None = None, workdir: Path | None = None,
              overrides: dict[str, Any] | None = None, detach: bool = False,
              timeout_s: float = 10.0, binds: tuple[Path, ...] = (),
              env: dict[str, str] | None = None) -> SimHost:
    """Validate the scenario, write the host's files and start its sshd on 127.0.0.1.

    ``detach`` leaves sshd running after this process exits (``sim up``); otherwise it
    is stopped at interpreter exit if nobody stopped it before. ``binds`` are real
    directories shared into the sandbox as they are (a daemon's socket directory, such
    as munge's for a real Slurm controller); ``env`` is exported to every session.
    """
    from bot.sim.build import build_state
    from bot.sim.scenario import load_scenario

    user = getpass.getuser()
    wd = Path(workdir) if workdir else Path(tempfile.mkdtemp(prefix="ib-sim-"))
    sc = load_scenario(scenario, overrides, canary=str(wd / "CANARY"))
    for attempt in range(5):
        chosen = port or _free_port()
        state = build_state(sc)
        state["sshd"] = sc.sshd.model_dump()
        state["canary"] = str(wd / "CANARY")
        state["binds"] = [str(Path(b).resolve()) for b in binds]
        key_path, known = _prepare(wd, state, chosen, user, env)
        proc = _launch(wd, detach)
        if _wait_listening(proc, wd, timeout_s):
            break
        _terminate_child(proc)
        if port is not None or attempt == 4:
            raise UserError(f"sim sshd did not start on 127.0.0.1:{chosen}: {_log_tail(wd)}")
    host = SimHost(name=sc.host, port=chosen, workdir=wd, key_path=key_path,
                   known_hosts_path=known, pid=proc.pid, user=user, _proc=proc)
    (wd / META).write_text(json.dumps({"name": host.name, "port": host.port, "pid": host.pid,
                                       "user": user, "scenario": str(scenario)}))
    if not detach:
        _LIVE[id(host)] = host
    return host


def _log_tail(workdir: Path) -> str:
    try:
        lines = (workdir / "sshd.log").read_text().strip().splitlines()
    except OSError:
        return "no log"
    return lines[-1] if lines else "no log output"


def load_sim(workdir: Path) -> SimHost:
    """Re-attach to a host started earlier (``sim down``/``sim status``)."""
    wd = Path(workdir)
    try:
        meta = json.loads((wd / META).read_text())
    except (OSError, ValueError):
        raise UserError(f"no simulated host in {wd} (missing or unreadable {META})", 2) from None
    return SimHost(name=meta["name"], port=int(meta["port"]), workdir=wd,
                   key_path=wd / "id_ed25519", known_hosts_path=wd / "known_hosts",
                   pid=int(meta["pid"]), user=meta.get("user", "root"))


@atexit.register
def _stop_all() -> None:
    for host in list(_LIVE.values()):
        host.stop()


# --- faults a host can suffer (issue 39): it freezes, or comes back with another key --------
def host_processes(host: SimHost) -> list[int]:
    """The host's sshd and everything under it (sessions, shells, tools), parents first."""
    if host.pid <= 0:
        return []
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    out, todo = [], [host.pid]
    while todo:
        pid = todo.pop(0)
        out.append(pid)
        todo.extend(sorted(children.get(pid, [])))
    return out


def _signal_all(pids: list[int], sig: signal.Signals) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)


def freeze(host: SimHost) -> None:
    """SIGSTOP the whole host: sshd, its sessions and any command still running, as a VM
    whose hypervisor paused it (a connection stays open; nothing answers)."""
    _signal_all(host_processes(host), signal.SIGSTOP)


def thaw(host: SimHost) -> None:
    """SIGCONT everything ``freeze`` stopped (children first is not needed: none ran)."""
    _signal_all(host_processes(host), signal.SIGCONT)


def restart_sshd(host: SimHost, *, new_host_key: bool = False, timeout_s: float = 10.0) -> None:
    """Kill the host's sshd and every session under it (the client's connection drops),
    then start sshd again on the same port, with a fresh host key when ``new_host_key``
    (a reinstalled host: its known_hosts line no longer matches)."""
    _signal_all(list(reversed(host_processes(host))), signal.SIGKILL)
    if host._proc is not None:
        with contextlib.suppress(subprocess.TimeoutExpired):
            host._proc.wait(timeout=5)
    if new_host_key:
        from bot.sim.keys import write_host_key

        write_host_key(host.workdir)
    proc = _launch(host.workdir, detach=False)
    if not _wait_listening(proc, host.workdir, timeout_s):
        raise UserError(f"sim sshd did not restart on 127.0.0.1:{host.port}: "
                        f"{_log_tail(host.workdir)}")
    host.pid, host._proc = proc.pid, proc
    _LIVE[id(host)] = host


def use_host_key(host: SimHost, private: bytes, public: str) -> None:
    """Put a saved host key back (``restart_sshd`` then serves it again)."""
    path = host.workdir / "host_ed25519"
    path.unlink(missing_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(private)
    (host.workdir / "host_ed25519.pub").write_text(public)
