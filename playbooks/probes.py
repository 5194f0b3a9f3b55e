"""Every read-only command sent to a host, in one place, each paired with its parser.

Diagnosis runs these through a ``Session``; remediation runs the same probes to capture
a host's state before an action, re-probe it after a timeout and verify after
(``bot.remediation.probe_runner``). Fixed text only, plus arguments that passed
``bot.domain.validate`` and are quoted by ``cmd``. No ``/proc`` reads: the tools answer
on real hosts and on simulated ones alike.
"""

from __future__ import annotations

from collections.abc import Sequence

from bot.domain.host_state import GpuState, ProcState, UnitState
from bot.domain.slurm import SlurmJob, SlurmNode
from playbooks.base import PlaybookOptions, Probe, cmd
from playbooks.commands import (
    QUERY_APPS_COMMAND,
    QUERY_GPU_COMMAND,
    QUERY_XML_COMMAND,
    SAMPLE_GPU_COMMAND,
)
from playbooks.parsers import disk, host, nvidia, nvidia_xml, ps, slurm, systemd
from playbooks.parsers.common import first_line, lines
from playbooks.parsers.smi_errors import SmiError

SHOW_PROPERTIES = ("Id,LoadState,ActiveState,SubState,UnitFileState,Restart,ExecStart,"
                   "FragmentPath,NRestarts,MainPID,Description,ActiveEnterTimestampMonotonic,"
                   "User")
# What remediation reads of a unit (``systemd.unit_state``) and of its drop-ins.
UNIT_STATE_PROPERTIES = ("LoadState,ActiveState,SubState,UnitFileState,MainPID,Restart,"
                         "FragmentPath,RestartUSec,NRestarts,TimeoutStopUSec")
DROPIN_PROPERTIES = "Restart,TimeoutStopUSec,DropInPaths,ExecStartPre"
NVIDIA_DEVICES = "/dev/nvidia*"  # expanded by the remote shell
JOURNAL_USAGE = "journalctl --disk-usage"  # allowlisted read-only in the sudoers drop-in
DOCKER_POLICY = "{{.HostConfig.RestartPolicy.Name}}"
# What a disk cleanup may remove (``bot.remediation.cleanup``): Hugging Face caches (the
# default path, and any HF_HOME's hub/models--*), torch hub and pip caches, checkpoints
# (a checkpoints/ directory, a Trainer's checkpoint-N), core dumps, rotated logs.
CLEANUP_FIND_TESTS = ("-path '*/huggingface/hub/*' -o -path '*/hub/models--*' "
                      "-o -path '*/hub/datasets--*' -o -path '*/torch/hub/*' -o -path '*/pip/*' "
                      "-o -path '*/checkpoints/*' -o -path '*/checkpoint-[0-9]*/*' "
                      "-o -name core -o -name 'core.[0-9]*' -o -path '*/coredump/*' "
                      "-o -name '*.log.[0-9]*' -o -path '*/log/*.[0-9].gz'")
ALL_SLURM_NODES = "TZ=UTC scontrol show node -o"  # reason times in UTC, whatever the zone


# Reads the looping nvidia-smi's rows (``count, index, ...``) line by line (the shell's
# ``read``: awk may wait to fill a 4 KiB buffer from a pipe) and prints them as the parser
# has always read them (``index, ...``, samples separated by ``---``). A sample is complete
# when it has ``count`` rows, or when an index repeats (a GPU missing from it); once ``n``
# are, the loop is stopped. Lines that are not GPU rows (nvidia-smi's errors) pass through.
SAMPLE_READ = (
    'g=0; r=0; l=-1; while IFS= read -r x; do c=${x%%,*}; y=${x#*, }; i=${y%%,*}; '
    'case "$c" in ""|*[!0-9]*) printf "%s\\n" "$x"; continue;; esac; '
    'case "$i" in ""|*[!0-9]*) printf "%s\\n" "$x"; continue;; esac; '
    'if [ $r -gt 0 ] && [ "$i" -le $l ]; then g=$((g+1)); r=0; [ $g -ge $n ] && break; fi; '
    '[ $r -eq 0 ] && [ $g -gt 0 ] && echo ---; printf "%s\\n" "$y"; r=$((r+1)); l=$i; '
    'if [ $r -ge "$c" ]; then g=$((g+1)); r=0; l=-1; [ $g -ge $n ] && break; fi; '
    'done < "$d/f"')


def gpu_samples(opts: PlaybookOptions) -> Probe[list[list[nvidia.GpuSample]] | SmiError]:
    """``samples`` readings ``sample_interval_s`` apart from ONE ``nvidia-smi`` looping on
    the host (``-lms``), read through a FIFO, stopped as soon as the last sample is
    complete (issue 37): one tool start, not one per sample. Printed in order, separated
    by ``---``. ``stdbuf -oL`` where present: the loop's rows come out as they are printed,
    whatever nvidia-smi's own buffering. The probe's exit status is 0 when every sample was
    read, else nvidia-smi's own (a driver/library mismatch, …)."""
    n = max(int(opts.samples), 1)
    every_ms = max(round(opts.sample_interval_s * 1000), 1)
    loop = ('d=$(mktemp -d) || exit 1; p=; '
            'trap \'[ -n "$p" ] && kill "$p" 2>/dev/null; rm -rf "$d"\' EXIT; '
            'mkfifo "$d/f" || exit 1; sb=; command -v stdbuf >/dev/null 2>&1 && sb="stdbuf -oL"; '
            f'$sb {SAMPLE_GPU_COMMAND} -lms {every_ms} > "$d/f" & p=$!; n={n}; '
            f'{SAMPLE_READ}; if [ $g -ge $n ]; then exit 0; fi; wait "$p"; s=$?; p=; exit $s')
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


def show_units(names: Sequence[str],
               properties: str = SHOW_PROPERTIES) -> Probe[list[dict[str, str]]]:
    """``systemctl show`` for validated unit names (the caller validates)."""
    return Probe("unit_details", cmd("systemctl", "show", "--no-pager", "-p", properties,
                                     *names), systemd.parse_show_many)


def show_unit(name: str, properties: str, probe: str = "unit") -> Probe[dict[str, str]]:
    """``show_units`` for one validated unit: its block (exit 0 for an unknown unit, whose
    ``LoadState`` reads ``not-found``)."""
    return Probe(probe, show_units([name], properties).command, systemd.parse_show)


def pid_units() -> Probe[dict[int, str | None]]:
    """Every PID and the unit its cgroup names (a unit's processes, a GPU holder's unit)."""
    return Probe("cgroups", f"ps -eo {ps.PS_CGROUP_FIELDS}", ps.cgroup_units)


def process(pid: int) -> Probe[ProcState]:
    """One PID: alive or gone, and its unit (exit 1 when it is gone)."""
    return Probe("process", cmd("ps", "-o", ps.PS_CGROUP_FIELDS, "-p", str(pid)),
                 lambda text: ps.parse_process(pid, text))


def process_args(pid: int) -> Probe[str]:
    """One PID's command line, first line cut short: evidence only, never a command."""
    return Probe("process-args", cmd("ps", "-o", "args=", "-p", str(pid)),
                 lambda text: first_line(text, 300))


def gpu_memory() -> Probe[list[GpuState]]:
    """One ``--query-gpu`` reading: per-GPU memory now."""
    return Probe("gpus", QUERY_GPU_COMMAND, nvidia.parse_gpu_states)


def gpu_xml() -> Probe[nvidia_xml.XmlReport]:
    return Probe("gpu_xml", QUERY_XML_COMMAND, nvidia_xml.parse_query_xml)


def regular_files(paths: Sequence[str]) -> Probe[set[str]]:
    """Which of the validated ``paths`` are regular files (a symlink or a directory is
    not); exit 1 when one is missing."""
    return Probe("files", cmd("find", *paths, "-maxdepth", "0", "-type", "f",
                              "-printf", "%p\\0"), disk.parse_nul_paths)


def cleanup_files(prefix: str) -> Probe[tuple[list[disk.FileSeen], int]]:
    """The files under a validated prefix a cleanup may remove, with size, age and owner;
    exit 1 for an unreadable subdirectory is normal."""
    return Probe("find", f"find {cmd(prefix)} -xdev -type f \\( {CLEANUP_FIND_TESTS} \\) "
                         "-printf '%s\\t%T@\\t%u\\t%p\\0'", disk.parse_find)


def open_by(path: str) -> Probe[list[int]]:
    """The PIDs holding a validated path open (``lsof`` exits 1 when none does)."""
    return Probe("lsof", cmd("lsof", "-t", "--", path), ps.parse_pids)


def sudo_allows(step: str, argv: Sequence[str]) -> Probe[str]:
    """``sudo -n -l CMD...``: exit 0 when the host's sudoers allow the command as written
    (the answer is the exit status; the output is what sudo printed)."""
    return Probe(f"sudo-l.{step}", cmd("sudo", "-n", "-l", *argv), str.strip)


def container_owner(scope: str, container: str) -> Probe[UnitState | None]:
    """A container's restart policy as the owner of its scope (``container`` is hex)."""
    return Probe("container", cmd("docker", "inspect", "--format", DOCKER_POLICY, container),
                 lambda text: host.container_owner(scope, container, text))


def slurm_node(node: str) -> Probe[SlurmNode | None]:
    return Probe("slurm.node", cmd("scontrol", "show", "node", "-o", node), slurm.parse_node)


def slurm_jobs(node: str) -> Probe[list[SlurmJob]]:
    return Probe("slurm.jobs", cmd("squeue", "-h", "-w", node, "-o", slurm.SQUEUE_FORMAT),
                 slurm.parse_jobs)


def slurm_nodes() -> Probe[list[SlurmNode]]:
    """Every node of the cluster (one Slurm host answers for all of them)."""
    return Probe("slurm.nodes", ALL_SLURM_NODES, slurm.parse_nodes)


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


def journal_usage(sudo: bool = False) -> Probe[int | None]:
    """A non-root user cannot size the journal: ``sudo`` runs it through ``sudo -n``."""
    return Probe("journal", f"sudo -n {JOURNAL_USAGE}" if sudo else JOURNAL_USAGE,
                 disk.parse_journal_usage)


def uptime() -> Probe[str]:
    return Probe("uptime", "uptime", lambda t: t.strip())


def memory() -> Probe[host.Memory | None]:
    return Probe("memory", "free -b", host.parse_free)


def dmesg_tail() -> Probe[list[str]]:
    return Probe("dmesg", "dmesg", lambda t: host.tail(t, 20))


def failed_units() -> Probe[list[systemd.UnitRow]]:
    return Probe("failed_units", "systemctl list-units --failed --no-legend --no-pager --plain",
                 systemd.parse_list_units)
