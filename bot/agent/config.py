"""Agent settings: command line plus environment (the token), no config file needed."""

from __future__ import annotations

import argparse
import os
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import Any

TOKEN_ENV = "INCIDENT_BOT_ALERT_TOKEN"


class AgentConfigError(ValueError):
    """Bad arguments or environment: one line, exit status 2."""


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


class _Formatter(argparse.HelpFormatter):
    """Capitalised "Usage:" like the rest of the CLI."""

    def add_usage(self, usage: str | None, actions: Any, groups: Any,
                  prefix: str | None = None) -> None:
        super().add_usage(usage, actions, groups, prefix or "Usage: ")


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="incident-bot agent", formatter_class=_Formatter,
        description="Host agent: NVML (VRAM held idle), boot id (VM restarted) and disk "
                    f"checks, posted to the bot's /alerts. The token comes from ${TOKEN_ENV}.")
    p.add_argument("--url", required=True, help="the bot's base URL, e.g. http://bot:8080")
    p.add_argument("--host", default=socket.gethostname().split(".")[0],
                   help="this host's inventory name (default: short hostname)")
    p.add_argument("--interval", type=float, default=30.0, help="seconds between checks")
    p.add_argument("--state-dir", default="/var/lib/incident-bot-agent",
                   help="boot id, conditions and the outbox of unsent alerts")
    p.add_argument("--once", action="store_true", help="check and send once, then exit")
    p.add_argument("--mount", action="append", dest="mounts", help="filesystem to watch "
                   "(repeatable; default /)")
    p.add_argument("--disk-used-pct", type=float, default=95.0)
    p.add_argument("--inodes-used-pct", type=float, default=95.0)
    p.add_argument("--vram-used-pct", type=float, default=50.0)
    p.add_argument("--util-max-pct", type=float, default=1.0)
    p.add_argument("--idle-for", type=float, default=600.0,
                   help="seconds held idle before vram_idle")
    p.add_argument("--boot-id-path", default="/proc/sys/kernel/random/boot_id")
    p.add_argument("--timeout", type=float, default=10.0)
    p.add_argument("--expected-gpus", type=int, default=None,
                   help="GPUs this host should have (the inventory's hosts.*.gpus)")
    return p


def parse_args(argv: list[str], environ: dict[str, str] | None = None) -> AgentConfig:
    """Raise ``AgentConfigError`` (or SystemExit for --help / argparse errors)."""
    args = _parser().parse_args(argv)
    env = os.environ if environ is None else environ
    token = env.get(TOKEN_ENV, "").strip()
    if not token:
        raise AgentConfigError(f"{TOKEN_ENV} is not set: the agent needs it to post alerts")
    if not args.url.startswith(("http://", "https://")):
        raise AgentConfigError(f"--url must be an http(s) URL, got {args.url!r}")
    if args.interval <= 0 or args.timeout <= 0 or args.idle_for < 0:
        raise AgentConfigError("--interval and --timeout must be > 0, --idle-for >= 0")
    return AgentConfig(
        url=args.url, token=token, host=args.host, state_dir=Path(args.state_dir),
        interval_s=args.interval, once=args.once, boot_id_path=Path(args.boot_id_path),
        mounts=tuple(args.mounts or ["/"]), disk_used_pct=args.disk_used_pct,
        inodes_used_pct=args.inodes_used_pct, vram_used_pct=args.vram_used_pct,
        util_max_pct=args.util_max_pct, idle_for_s=args.idle_for, timeout_s=args.timeout,
        expected_gpus=args.expected_gpus,
    )
