"""Every command a playbook sends, in one place, each paired with its parser.

Fixed text only, plus arguments that passed ``bot.domain.validate`` and are quoted by ``cmd``.
No ``/proc`` reads: the tools answer on real hosts and on simulated ones alike.
"""

from __future__ import annotations

from collections.abc import Sequence

from playbooks.base import PlaybookOptions, Probe, cmd
from playbooks.commands import QUERY_APPS_COMMAND, QUERY_GPU_COMMAND
from playbooks.parsers import disk, host, nvidia, ps, systemd
from playbooks.parsers.common import lines

SHOW_PROPERTIES = ("Id,LoadState,ActiveState,SubState,UnitFileState,Restart,ExecStart,"
                   "FragmentPath,NRestarts,MainPID,Description,ActiveEnterTimestampMonotonic")
NVIDIA_DEVICES = "/dev/nvidia*"  # expanded by the remote shell


def gpu_samples(opts: PlaybookOptions) -> Probe[list[list[nvidia.GpuSample]]]:
    """Several ``--query-gpu`` samples started ``sample_interval_s`` apart, printed in order
    and separated by ``---``. Each sample runs in the background into its own temp file,
    so the window is the interval, not the interval plus every ``nvidia-smi`` call's own
    run time (0.1-0.5 s each); the first failing sample's exit status is the probe's."""
    query = QUERY_GPU_COMMAND
    n = max(int(opts.samples), 1)
    sep = nvidia.SAMPLE_SEPARATOR
    pause = f"{max(opts.sample_interval_s, 0.0):g}"
    loop = ('d=$(mktemp -d) || exit 1; trap \'rm -rf "$d"\' EXIT; pids=; i=0; '
            f'while :; do {query} > "$d/$i" & pids="$pids $!"; i=$((i+1)); '
            f'[ $i -ge {n} ] && break; sleep {pause}; done; '
            'rc=0; for p in $pids; do wait "$p"; s=$?; [ $rc -eq 0 ] && rc=$s; done; '
            f'i=0; while [ $i -lt {n} ]; do [ $i -gt 0 ] && echo {sep}; cat "$d/$i"; '
            'i=$((i+1)); done; exit $rc')
    return Probe("gpus", loop, nvidia.parse_gpu_samples,
                 timeout_s=opts.window_s + opts.command_timeout_s, required=True)


def compute_apps() -> Probe[list[nvidia.ComputeApp]]:
    return Probe("gpu_processes", QUERY_APPS_COMMAND, nvidia.parse_compute_apps)


def processes() -> Probe[list[ps.Proc]]:
    text = f"ps -ww -eo {ps.PS_FIELDS} && echo {ps.SECTION} && ps -ww -eo {ps.PS_CGROUP_FIELDS}"
    return Probe("processes", text, ps.parse_ps, required=True)


def clock() -> Probe[list[str]]:
    """Now (epoch and zone) and boot time, for 'started N s after boot'."""
    return Probe("clock", "date '+%s %z'; uptime -s", lines)


def gpu_device_users() -> Probe[list[int]]:
    """PIDs holding /dev/nvidia* (works when nvidia-smi cannot map PIDs to this namespace)."""
    return Probe("gpu_device_users", f"lsof -t {NVIDIA_DEVICES}", ps.parse_pids)


def unit_files() -> Probe[list[systemd.UnitFileRow]]:
    return Probe("unit_files", "systemctl list-unit-files --type=service --no-legend --no-pager",
                 systemd.parse_list_unit_files)


def units() -> Probe[list[systemd.UnitRow]]:
    return Probe("units",
                 "systemctl list-units --type=service --all --no-legend --no-pager --plain",
                 systemd.parse_list_units)


def show_units(names: Sequence[str]) -> Probe[list[dict[str, str]]]:
    """``systemctl show`` for validated unit names (the caller validates)."""
    return Probe("unit_details", cmd("systemctl", "show", "--no-pager", "-p", SHOW_PROPERTIES,
                                     *names), systemd.parse_show_many)


def unit_of_pid(pid: str) -> Probe[str | None]:
    return Probe(f"unit_of_{pid}", cmd("systemctl", "status", "--no-pager", "-n", "0", pid),
                 systemd.unit_from_status)


def crontab(user: str | None = None) -> Probe[list[host.CronLine]]:
    who = user or "root"
    argv = ("crontab", "-l") if user is None else ("crontab", "-l", "-u", user)
    return Probe(f"crontab_{who}", cmd(*argv), lambda t: host.parse_crontab(t, who))


def docker_inspect(ids: Sequence[str] = ()) -> Probe[list[dict[str, object]]]:
    """Given ids (validated hex): those; else every container (restart policies at boot)."""
    text = cmd("docker", "inspect", *ids) if ids else \
        'ids=$(docker ps -aq --no-trunc) && [ -n "$ids" ] && docker inspect $ids'
    return Probe("containers", text, host.parse_docker_inspect)


def boots() -> Probe[list[host.Boot]]:
    return Probe("boots", "journalctl --list-boots --no-pager", host.parse_list_boots)


def previous_boot_tail() -> Probe[str]:
    return Probe("previous_boot_tail", "journalctl -b -1 -n 20 --no-pager", lambda t: t)


def df() -> Probe[list[disk.Filesystem]]:
    return Probe("df", "df -PT -B1", disk.parse_df, required=True)


def mount_options() -> Probe[dict[str, set[str]]]:
    return Probe("mount_options", "findmnt -rn -o TARGET,OPTIONS", disk.parse_findmnt)


def df_inodes() -> Probe[list[disk.Filesystem]]:
    return Probe("df_inodes", "df -PTi", disk.parse_df_inodes)


def du(path: str, timeout_s: float) -> Probe[list[disk.DuEntry]]:
    """Largest directories one level down (``path`` already validated)."""
    return Probe("du", cmd("du", "-x", "-d", "1", "-B1", path), disk.parse_du, timeout_s=timeout_s)


def shm_usage() -> Probe[list[disk.DuEntry]]:
    return Probe("shm", "du -x -d 1 -B1 /dev/shm", disk.parse_du)


def deleted_open_files() -> Probe[list[disk.OpenFile]]:
    return Probe("deleted_open", "lsof -n -P +L1", disk.parse_lsof)


def journal_usage() -> Probe[int | None]:
    return Probe("journal", "journalctl --disk-usage", disk.parse_journal_usage)


def uptime() -> Probe[str]:
    return Probe("uptime", "uptime", lambda t: t.strip())


def memory() -> Probe[host.Memory | None]:
    return Probe("memory", "free -b", host.parse_free)


def dmesg_tail() -> Probe[list[str]]:
    return Probe("dmesg", "dmesg", lambda t: host.tail(t, 20))


def failed_units() -> Probe[list[systemd.UnitRow]]:
    return Probe("failed_units", "systemctl list-units --failed --no-legend --no-pager --plain",
                 systemd.parse_list_units)
