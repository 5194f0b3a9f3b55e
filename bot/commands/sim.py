"""`incident-bot sim up|down|list|scenarios`: simulated GPU hosts over a real sshd.

``up`` starts sshd detached and returns; ``down`` stops it by the PID recorded in the
host's directory (after checking that PID is still that sshd).
"""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Annotated

import typer

from bot.commands.common import sub_app
from bot.core import strings
from bot.core.errors import UserError

DEFAULT_ROOT = Path("/tmp/incident-bot-sim")

_Scenario = Annotated[str, typer.Argument(metavar="SCENARIO",
                                          help="shipped name (seed, ...) or a YAML path")]
_Port = Annotated[int | None, typer.Option("--port", "-p", min=1, max=65535, metavar="PORT",
                                           help="port on 127.0.0.1 (default: a free one)")]
_Dir = Annotated[Path | None, typer.Option("--dir", metavar="DIR",
                                           help="the host's directory (default: "
                                                "/tmp/incident-bot-sim/PORT)")]
_Root = Annotated[Path, typer.Option("--root", metavar="DIR",
                                     help="where `sim up` puts hosts by default")]


def _up(scenario: str, port: int | None, workdir: Path | None) -> None:
    from bot.core.procs import free_port
    from bot.sim.sshd import load_sim, start_sim

    port = port or free_port()
    wd = workdir or DEFAULT_ROOT / str(port)
    if (wd / "sim.json").exists():
        old = load_sim(wd)
        if old.alive():
            raise UserError(strings.SIM_DIR_IN_USE.format(workdir=wd, name=old.name,
                                                          port=old.port), 2)
    host = start_sim(scenario, port=port, workdir=wd, detach=True)
    typer.echo(strings.SIM_UP.format(
        name=host.name, scenario=scenario, target=host.target, key=host.key_path,
        known_hosts=host.known_hosts_path, known_line=host.known_hosts_line, workdir=wd,
        diagnose=diagnose_line(host.target, host.key_path, host.known_hosts_path),
        ssh=" ".join(shlex.quote(a) for a in host.ssh_argv("nvidia-smi"))))


def diagnose_line(target: str, key: Path, known_hosts: Path) -> str:
    """The ``incident-bot diagnose`` command that reaches the host just started."""
    return " ".join(shlex.quote(a) for a in (
        "incident-bot", "diagnose", target, "--ssh-key", str(key),
        "--known-hosts", str(known_hosts)))


def _down(workdir: Path | None, port: int | None, root: Path = DEFAULT_ROOT) -> None:
    from bot.sim.sshd import load_sim

    if workdir is None and port is None:
        workdir = _the_one_up(root)
    host = load_sim(workdir or root / str(port))
    pid, alive = host.pid, host.alive()
    host.stop()
    template = strings.SIM_DOWN if alive else strings.SIM_NOT_RUNNING
    typer.echo(template.format(name=host.name, port=host.port, pid=pid))


def _the_one_up(root: Path) -> Path:
    """The directory of the one host up under ``root``; when none or several are, say so
    (and list them, each with the command that stops it)."""
    from bot.sim.sshd import load_sim

    hosts = [load_sim(p.parent) for p in sorted(root.glob("*/sim.json"))] if root.is_dir() else []
    up = [h for h in hosts if h.alive()]
    if len(up) == 1:
        return up[0].workdir
    if not up:
        raise UserError(strings.SIM_NEED_TARGET.format(root=root), 2)
    listed = "\n".join(f"  {h.name} on port {h.port}: incident-bot sim down --dir {h.workdir}"
                        for h in up)
    raise UserError(strings.SIM_WHICH.format(n=len(up), hosts=listed), 2)


def _list(root: Path) -> None:
    from bot.sim.sshd import load_sim

    hosts = [load_sim(p.parent) for p in sorted(root.glob("*/sim.json"))] if root.is_dir() else []
    if not hosts:
        typer.echo(strings.SIM_NONE.format(root=root))
        return
    for h in hosts:
        state = "up" if h.alive() else "down"
        typer.echo(f"{h.name:<12} {h.target:<22} {state:<5} {h.workdir}")


def register(app: typer.Typer) -> None:
    sim = sub_app("Simulated GPU hosts over a real OpenSSH sshd.")

    @sim.command("up")
    def up(scenario: _Scenario, port: _Port = None, workdir: _Dir = None) -> None:
        """Start a simulated host in the background and print how to reach it."""
        _up(scenario, port, workdir)

    @sim.command("down")
    def down(workdir: _Dir = None, port: _Port = None, root: _Root = DEFAULT_ROOT) -> None:
        """Stop a simulated host (the one up, or the one named), by its recorded PID."""
        _down(workdir, port, root)

    @sim.command("list")
    def list_(root: _Root = DEFAULT_ROOT) -> None:
        """Simulated hosts under the default directory, up or down."""
        _list(root)

    @sim.command("scenarios")
    def scenarios() -> None:
        """The scenarios shipped with incident-bot."""
        from bot.sim.scenario import load_scenario, shipped_names

        for name in shipped_names():
            typer.echo(f"{name:<16} {load_scenario(name).description}")

    app.add_typer(sim, name="sim")
