"""``/ir status``'s words for one host: its GPUs, its disks and its open incidents (pure).

GPUs that read the same are one line ("GPUs 0–7: 75.8 of 95.6 GiB used, 0% busy"); a
disk is "98% full: 13.4 GiB free of 3.4 TiB"; every size in GiB/TiB (``bot.core.fmt``).
Host text (device names, the tool's error) is escaped.
"""

from __future__ import annotations

from collections.abc import Sequence

from bot.chat.summary import index_ranges
from bot.chat.text import escape
from bot.core import fmt, strings
from playbooks.glance import Glance
from playbooks.parsers.disk import Filesystem
from playbooks.parsers.nvidia import GpuSample
from playbooks.parsers.smi_errors import SmiError


def host_status(g: Glance, incidents: Sequence[str]) -> str:
    """The host's block: a bold name, then GPUs, disks and incidents, one line each."""
    lines = [f"*{escape(g.host)}*"]
    if g.unreachable:
        lines.append(strings.STATUS_UNREACHABLE.format(why=escape(g.unreachable)))
    else:
        lines += gpu_lines(g.gpus)
        lines.append(strings.STATUS_DISKS.format(disks=disks(g.filesystems)))
    lines.append(strings.STATUS_INCIDENTS.format(
        incidents=", ".join(incidents) or strings.STATUS_NO_INCIDENTS))
    return "\n".join(lines)


def gpu_lines(gpus: list[GpuSample] | SmiError) -> list[str]:
    """One line per group of GPUs that read the same (memory used, total, utilization)."""
    if isinstance(gpus, SmiError):
        return [strings.STATUS_GPUS_UNREAD.format(quote=escape(gpus.quote))]
    if not gpus:
        return [strings.STATUS_NO_GPUS]
    groups: dict[tuple[str, str, str], list[int]] = {}
    for g in sorted(gpus, key=lambda x: x.index):
        used = fmt.gib(g.memory_used_mib).removesuffix(" GiB")
        util = "?" if g.utilization_pct is None else f"{g.utilization_pct}%"
        groups.setdefault((used, fmt.gib(g.memory_total_mib), util), []).append(g.index)
    return [strings.STATUS_GPUS.format(
        which=_which(indexes), used=used, total=total, util=util)
        for (used, total, util), indexes in groups.items()]


def _which(indexes: list[int]) -> str:
    return (strings.STATUS_GPU_ONE if len(indexes) == 1 else strings.STATUS_GPU_MANY).format(
        indexes=index_ranges(indexes))


def disks(filesystems: Sequence[Filesystem]) -> str:
    """``/ 21% full: 158.0 GiB free of 200.0 GiB · /data 98% full: …``."""
    shown = [strings.STATUS_DISK.format(mount=escape(f.mount), pct=f.used_pct or 0.0,
                                        avail=fmt.size(f.avail), size=fmt.size(f.size))
             for f in filesystems]
    return " · ".join(shown) or strings.STATUS_NO_DISKS
