"""Agent settings: command line plus environment (the token), no config file needed.

The command line is a typer command (``register``), the same one ``incident-bot agent``
and the lean ``python -m bot.agent`` run, so both show one help in the CLI's one style.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import typer

from bot.core.cli_style import PLAIN_HELP
from bot.core.errors import UserError

TOKEN_ENV = "INCIDENT_BOT_ALERT_TOKEN"
DEFAULT_STATE_DIR = "/var/lib/incident-bot-agent"


class AgentConfigError(UserError):
    """Bad arguments or environment: one line, exit status 2."""

    def __init__(self, message: str) -> None:
        super().__init__(message, 2)


@dataclass(frozen=True)
class AgentConfig:
    url: str  # the bot's base URL; alerts go to <url>/alerts
    token: str
    host: str
    state_dir: Path
    interval_s: float = 30.0
    once: bool = False
    boot_id_path: Path = Path("/proc/sys/kernel/random/boot_id")
    mounts: tuple[str, ...] = ("/",)
    disk_used_pct: float = 95.0  # alert at or above this much space used
    inodes_used_pct: float = 95.0
    vram_used_pct: float = 50.0  # memory "held" at or above this share of the GPU
    util_max_pct: float = 1.0  # "~0% utilisation": every sample at or below this
    idle_for_s: float = 600.0  # held idle this long before vram_idle fires
    timeout_s: float = 10.0  # per HTTP request
    batch: int = 100
    expected_gpus: int | None = None  # fewer visible to NVML: a gpu_missing alert

    @property
    def alerts_url(self) -> str:
        return self.url.rstrip("/") + "/alerts"


def _short_hostname() -> str:
    return socket.gethostname().split(".")[0]


def make_config(*, url: str, host: str, interval: float, state_dir: str, once: bool,
                mounts: list[str] | None, disk_used_pct: float, inodes_used_pct: float,
                vram_used_pct: float, util_max_pct: float, idle_for: float, boot_id_path: str,
                timeout: float, expected_gpus: int | None,
                environ: Mapping[str, str] | None = None) -> AgentConfig:
    """The options plus the token from the environment; ``AgentConfigError`` when unusable."""
    env = os.environ if environ is None else environ
    token = env.get(TOKEN_ENV, "").strip()
    if not token:
        raise AgentConfigError(f"{TOKEN_ENV} is not set: the agent needs it to post alerts")
    if not url.startswith(("http://", "https://")):
        raise AgentConfigError(f"--url must be an http(s) URL, got {url!r}")
    return AgentConfig(
        url=url, token=token, host=host, state_dir=Path(state_dir), interval_s=interval,
        once=once, boot_id_path=Path(boot_id_path), mounts=tuple(mounts or ["/"]),
        disk_used_pct=disk_used_pct, inodes_used_pct=inodes_used_pct,
        vram_used_pct=vram_used_pct, util_max_pct=util_max_pct, idle_for_s=idle_for,
        timeout_s=timeout, expected_gpus=expected_gpus,
    )


def register(app: typer.Typer, run: Callable[[AgentConfig], int],
             environ: Mapping[str, str] | None = None) -> None:
    """Add ``agent`` to ``app`` (the ``incident-bot`` CLI, or ``python -m bot.agent``'s own):
    its options, in the one help style, then ``run(config)`` for the exit status."""

    @app.command(name="agent")
    def agent(
        url: Annotated[str, typer.Option("--url", metavar="URL",
                                         help="the bot's base URL, e.g. http://bot:8080")],
        host: Annotated[str, typer.Option("--host", metavar="NAME", show_default=False,
                                          help="this host's inventory name (default: short "
                                               "hostname)")] = "",
        interval: Annotated[float, typer.Option("--interval", min=0.001, metavar="SECONDS",
                                                help="seconds between checks")] = 30.0,
        state_dir: Annotated[str, typer.Option(
            "--state-dir", metavar="DIR",
            help="boot id, conditions and the outbox of unsent alerts")] = DEFAULT_STATE_DIR,
        once: Annotated[bool, typer.Option("--once",
                                           help="check and send once, then exit")] = False,
        mounts: Annotated[list[str] | None, typer.Option(
            "--mount", metavar="PATH", help="filesystem to watch (repeatable; default /)")]
        = None,
        disk_used_pct: Annotated[float, typer.Option(
            "--disk-used-pct", min=0, max=100, metavar="PERCENT",
            help="alert at or above this much space used")] = 95.0,
        inodes_used_pct: Annotated[float, typer.Option(
            "--inodes-used-pct", min=0, max=100, metavar="PERCENT",
            help="alert at or above this share of inodes used")] = 95.0,
        vram_used_pct: Annotated[float, typer.Option(
            "--vram-used-pct", min=0, max=100, metavar="PERCENT",
            help="GPU memory counts as held at or above this share")] = 50.0,
        util_max_pct: Annotated[float, typer.Option(
            "--util-max-pct", min=0, max=100, metavar="PERCENT",
            help="utilisation counts as idle at or below this")] = 1.0,
        idle_for: Annotated[float, typer.Option("--idle-for", min=0, metavar="SECONDS",
                                                help="seconds held idle before vram_idle")]
        = 600.0,
        boot_id_path: Annotated[str, typer.Option("--boot-id-path", metavar="FILE",
                                                  help="where the kernel's boot id is read")]
        = "/proc/sys/kernel/random/boot_id",
        timeout: Annotated[float, typer.Option("--timeout", min=0.001, metavar="SECONDS",
                                               help="per HTTP request")] = 10.0,
        expected_gpus: Annotated[int | None, typer.Option(
            "--expected-gpus", min=0, max=64, metavar="N",
            help="GPUs this host should have (the inventory's hosts.*.gpus)")] = None,
    ) -> None:
        """Host agent: NVML, boot id and disk checks, posted to the bot's /alerts.

        The token comes from $INCIDENT_BOT_ALERT_TOKEN.
        """
        config = make_config(
            url=url, host=host or _short_hostname(), interval=interval, state_dir=state_dir,
            once=once, mounts=mounts, disk_used_pct=disk_used_pct,
            inodes_used_pct=inodes_used_pct, vram_used_pct=vram_used_pct,
            util_max_pct=util_max_pct, idle_for=idle_for, boot_id_path=boot_id_path,
            timeout=timeout, expected_gpus=expected_gpus, environ=environ)
        code = run(config)
        if code:
            raise typer.Exit(code)


def lean_app(run: Callable[[AgentConfig], int],
             environ: Mapping[str, str] | None = None) -> typer.Typer:
    """``python -m bot.agent``: a one-command app with the same options and help."""
    app = typer.Typer(**PLAIN_HELP)
    register(app, run, environ)
    return app


def parse_args(argv: list[str], environ: Mapping[str, str] | None = None) -> AgentConfig:
    """The config the command line and ``environ`` give (the same parser as ``agent``);
    ``AgentConfigError`` for a bad value, click's usage error for a bad option."""
    seen: list[AgentConfig] = []

    def keep(config: AgentConfig) -> int:
        seen.append(config)
        return 0

    command = typer.main.get_command(lean_app(keep, environ))
    command.main(args=list(argv), prog_name="incident-bot agent", standalone_mode=False)
    if not seen:
        raise AgentConfigError("no config: --help was asked for")
    return seen[0]
