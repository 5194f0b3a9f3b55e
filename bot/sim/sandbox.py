"""A private root for a simulated host, so its commands can never write to this machine.

sshd is started as ``unshare -m -- python ... bot.sim.sandbox WORKDIR -- sshd ...``: in a
mount namespace of its own, ``/`` is overlaid (lower: this machine's ``/``, upper: a
tmpfs that dies with the namespace), ``/dev`` holds only the harmless devices, and the
host's workdir is bound through so its state file stays shared with the test. Each
session then ``chroot``s into that overlay (``bot.sim.run``): a ``rm``, a redirection or a
drop-in written by a remediation lands in the tmpfs, never on the real disk.

Scenario ``files`` are created there (sparse, with their age) before sshd starts.
Stdlib only: it runs on every sim start.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bot.sim.run import SANDBOX_MARKER as MARKER
from bot.sim.run import python_entry
from bot.sim.state import load_state

DEVICES = ("null", "zero", "full", "random", "urandom", "tty")


@functools.lru_cache(maxsize=1)
def available() -> bool:
    """Sims are sandboxed when this process may make a mount namespace with an overlay.

    Tried once (a throwaway namespace mounting a tmpfs and an overlay of ``/``): root in
    a container without CAP_SYS_ADMIN has ``unshare`` but may not mount.
    """
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        return False
    with tempfile.TemporaryDirectory(prefix="ib-sandbox-probe-") as tmp:
        script = (f"mount -t tmpfs tmpfs {tmp} && mkdir {tmp}/u {tmp}/w {tmp}/m && "
                  f"mount -t overlay overlay -o lowerdir=/,upperdir={tmp}/u,workdir={tmp}/w "
                  f"{tmp}/m")
        try:
            probe = subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c",
                                    script], capture_output=True, timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            return False
    return probe.returncode == 0


def wrap(argv: list[str], workdir: Path) -> list[str]:
    """The sshd command line run inside a fresh mount namespace with the overlay."""
    if not available():
        return argv
    return ["unshare", "-m", "--propagation", "private", "--",
            *python_entry("bot.sim.sandbox"), str(workdir), "--", *argv]


def root_of(workdir: str | os.PathLike[str]) -> str | None:
    """The chroot a session must enter, or None when this host has no sandbox."""
    try:
        root = Path(workdir, MARKER).read_text().rstrip("\n")
    except OSError:
        return None
    return root or None


def _mount(*args: str) -> None:
    subprocess.run(["mount", *args], check=True, stdin=subprocess.DEVNULL)


def _devices(root: Path) -> None:
    dev = root / "dev"
    _mount("-t", "tmpfs", "-o", "mode=0755,size=1m", "tmpfs", str(dev))
    for name in DEVICES:
        if Path("/dev", name).exists():
            (dev / name).touch()
            _mount("--bind", f"/dev/{name}", str(dev / name))
    (dev / "shm").mkdir()
    _mount("-t", "tmpfs", "-o", "mode=1777,size=64m", "tmpfs", str(dev / "shm"))


def setup(workdir: Path, binds: tuple[str, ...] = ()) -> Path:
    """Mount the overlay root (inside the private namespace) and return it; ``binds``
    (absolute directories) are the real ones inside it, not overlay copies."""
    base = workdir / "sandbox"
    base.mkdir(exist_ok=True)
    _mount("-t", "tmpfs", "-o", "mode=0700,size=4g", "tmpfs", str(base))
    for sub in ("upper", "work", "root"):
        (base / sub).mkdir()
    root = base / "root"
    _mount("-t", "overlay", "overlay", "-o",
           f"lowerdir=/,upperdir={base / 'upper'},workdir={base / 'work'}", str(root))
    _devices(root)
    for path in (str(workdir), *binds):
        inner = root / path.lstrip("/")
        inner.mkdir(parents=True, exist_ok=True)
        _mount("--bind", path, str(inner))
    return root


def inside(root: Path, path: str) -> Path:
    """``path`` on the simulated host, as a path under ``root`` (no ``..``, absolute)."""
    parts = Path(path).parts
    if not path.startswith("/") or ".." in parts:
        raise ValueError(f"sim file path must be absolute without '..': {path!r}")
    return root.joinpath(*parts[1:])


def materialize(root: Path, files: list[dict[str, Any]], now: float) -> None:
    """Scenario files: sparse (their size costs no memory), aged, in the overlay only."""
    for f in files:
        path = inside(root, f["path"])
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "wb") as fh:
            fh.truncate(int(f["size"]))
        mtime = now - float(f.get("age_days", 0)) * 86400
        os.utime(path, (mtime, mtime))


def main(args: list[str]) -> int:
    if len(args) < 3 or args[1] != "--":
        sys.stderr.write("usage: python -m bot.sim.sandbox WORKDIR -- COMMAND...\n")
        return 2
    workdir = Path(args[0])
    state = load_state(workdir)
    root = setup(workdir, tuple(state.get("binds") or ()))
    materialize(root, state.get("files") or [], time.time())
    from bot.sim.reboot import write_boot_id

    write_boot_id(root, str(state["boot"]["id"]))
    from bot.sim.tools.infiniband import write_sysfs

    write_sysfs(str(root), state.get("infiniband") or [])
    (workdir / MARKER).write_text(f"{root}\n")
    os.execv(args[2], args[2:])
    return 127  # pragma: no cover - execv does not return


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
