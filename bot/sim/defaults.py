"""What every simulated Debian host has whatever the scenario: init, journald, sshd, cron.

Scenarios opt out with ``base_processes: false``. Plain dicts, validated by the scenario
models at ``sim up``.
"""

from __future__ import annotations

from typing import Any

# PCI bus numbers of an 8-GPU HGX-style board, in nvidia-smi index order.
BUS_IDS = ("18", "2A", "3A", "5D", "9A", "AB", "BA", "DB")


def _sys(unit: str) -> dict[str, str]:
    return {"kind": "systemd", "name": unit}


BASE_PROCESSES: list[dict[str, Any]] = [
    {"pid": 1, "ppid": 0, "args": "/sbin/init", "comm": "systemd", "started_s_after_boot": 0,
     "rss_kib": 13056, "vsz_kib": 167744, "stat": "Ss"},
    {"pid": 2, "ppid": 0, "args": "[kthreadd]", "started_s_after_boot": 0, "rss_kib": 0,
     "vsz_kib": 0, "stat": "S"},
    {"pid": 312, "args": "/lib/systemd/systemd-journald", "started_s_after_boot": 2,
     "rss_kib": 41220, "vsz_kib": 90412, "stat": "Ss", "owner": _sys("systemd-journald.service")},
    {"pid": 402, "args": "/usr/sbin/cron -f", "started_s_after_boot": 6, "rss_kib": 2688,
     "vsz_kib": 6608, "stat": "Ss", "owner": _sys("cron.service")},
    {"pid": 415, "args": "/usr/bin/nvidia-persistenced --user nvidia-persistenced",
     "user": "nvidia-persistenced", "comm": "nvidia-persiste", "started_s_after_boot": 7,
     "rss_kib": 1912, "vsz_kib": 5304, "stat": "Ss", "owner": _sys("nvidia-persistenced.service")},
    {"pid": 421, "args": "sshd: /usr/sbin/sshd -D [listener] 0 of 10-100 startups",
     "comm": "sshd", "started_s_after_boot": 7, "rss_kib": 9600, "vsz_kib": 15436, "stat": "Ss",
     "owner": _sys("ssh.service")},
]

BASE_UNITS: dict[str, dict[str, Any]] = {
    "systemd-journald.service": {
        "description": "Journal Service", "exec_start": "/lib/systemd/systemd-journald",
        "active_state": "active", "unit_file_state": "static", "wanted_by": "",
        "fragment_path": "/lib/systemd/system/systemd-journald.service",
        "active_enter_s_after_boot": 2, "restart": "always", "restart_sec": 0},
    "cron.service": {
        "description": "Regular background program processing daemon",
        "exec_start": "/usr/sbin/cron -f $EXTRA_OPTS", "active_state": "active",
        "unit_file_state": "enabled", "fragment_path": "/lib/systemd/system/cron.service",
        "active_enter_s_after_boot": 6, "restart": "on-failure"},
    "nvidia-persistenced.service": {
        "description": "NVIDIA Persistence Daemon",
        "exec_start": "/usr/bin/nvidia-persistenced --user nvidia-persistenced",
        "active_state": "active", "unit_file_state": "enabled",
        "fragment_path": "/lib/systemd/system/nvidia-persistenced.service",
        "active_enter_s_after_boot": 7},
    "ssh.service": {
        "description": "OpenBSD Secure Shell server", "exec_start": "/usr/sbin/sshd -D $SSHD_OPTS",
        "active_state": "active", "unit_file_state": "enabled",
        "fragment_path": "/lib/systemd/system/ssh.service", "active_enter_s_after_boot": 7,
        "restart": "on-failure"},
}
