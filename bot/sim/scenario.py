"""Scenario files (YAML) for simulated hosts: validated once at ``sim up``, then frozen
into ``state.json`` that the stdlib-only tools read. Times in a scenario are relative
(seconds after/before boot) so a host always looks freshly booted when it starts.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import Field, ValidationError, field_validator

from bot.core.errors import UserError
from bot.core.schema import StrictModel

SCENARIO_DIR = Path(__file__).parent / "scenarios"


class GpuSpec(StrictModel):
    """One GPU; ``count`` on the first entry replicates it (uuid and bus id derived)."""

    count: int = Field(default=1, ge=1, le=64)
    name: str = "NVIDIA H100 80GB HBM3"
    uuid: str | None = None
    bus_id: str | None = None
    memory_total_mib: int = Field(default=81559, gt=0)
    memory_reserved_mib: int = Field(default=0, ge=0)  # used with no process (driver, contexts)
    utilization_gpu: int = Field(default=0, ge=0, le=100)
    utilization_memory: int = Field(default=0, ge=0, le=100)
    power_draw_w: float = Field(default=60.0, ge=0)
    power_limit_w: float = Field(default=700.0, gt=0)
    temperature_c: int = 34
    fan: str = "N/A"
    perf: str = "P0"
    persistence_mode: Literal["Enabled", "Disabled"] = "Enabled"
    compute_mode: str = "Default"
    ecc_errors: int = 0  # volatile uncorrectable (double-bit) ECC errors since driver load
    lost: bool = False  # fallen off the bus: nvidia-smi cannot open it (Xid 79)
    visible: bool = True  # false: not enumerated at all (missing after a reboot)
    remap_pending: bool = False
    remap_failure: bool = False
    retired_pages: int = Field(default=0, ge=0)
    slowdowns: list[Literal["hw_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown",
                            "sw_thermal_slowdown"]] = Field(default_factory=list)
    pcie_replays: int = Field(default=0, ge=0)
    reset_fails: bool = False  # nvidia-smi --gpu-reset answers "Unknown Error" (exit 255)
    # the PCIe link under load (an idle GPU reports gen 1: the driver power-manages the link)
    pcie_gen: int = Field(default=5, ge=1, le=6)
    pcie_gen_max: int = Field(default=5, ge=1, le=6)
    pcie_width: int = Field(default=16, ge=1, le=32)
    pcie_width_max: int = Field(default=16, ge=1, le=32)
    nvlink_links: int = Field(default=0, ge=0, le=18)  # 18 on an H100 SXM
    nvlink_errors: dict[int, dict[str, int]] = Field(default_factory=dict)  # link -> counter -> n


class NvidiaSpec(StrictModel):
    driver_version: str = "580.95.05"
    cuda_version: str = "13.0"
    sees_pids: bool = True  # inside a container nvidia-smi cannot map PIDs
    utilization_samples: list[int] = Field(default_factory=list)  # for -l loops
    library_version: str | None = None  # differs from driver_version: NVML mismatch
    hang_s: float = Field(default=0.0, ge=0, le=86400)  # nvidia-smi answers this late
    denied: bool = False  # the login may not open the devices: NVML "Insufficient Permissions"
    fabric: bool = False  # an NVSwitch host (fabric state in -q -x)


class Owner(StrictModel):
    kind: Literal["systemd", "cron", "docker", "none"] = "none"
    name: str = ""  # unit name, crontab user or container name


class ProcessSpec(StrictModel):
    pid: int = Field(ge=1, lt=4_194_304)
    ppid: int = 1
    user: str = "root"
    args: str
    comm: str | None = None
    started_s_after_boot: float = Field(default=30.0, ge=0)
    rss_kib: int = Field(default=65536, ge=0)
    vsz_kib: int = Field(default=262144, ge=0)
    pcpu: float = 0.0
    pmem: float = 0.0
    stat: str = "Sl"
    gpu_memory_mib: int | list[int] | dict[int, int] = 0
    owner: Owner = Field(default_factory=Owner)
    ignores: list[str] = Field(default_factory=list)  # signals it survives (e.g. TERM)
    leaks_gpu_memory: bool = False  # when killed its GPU memory stays held (a wedged GPU)
    holds_devices: bool = False  # keeps /dev/nvidia* open with no GPU memory (a monitor)
    hidden: bool = False  # in a PID namespace the login cannot see (a sandboxed container):
    #                       not in ps, lsof, fuser or `systemctl status PID`; holds its memory


class UnitSpec(StrictModel):
    description: str = ""
    exec_start: str = ""
    user: str = "root"
    restart: Literal["no", "always", "on-failure", "on-abnormal", "on-abort", "on-success"] = "no"
    restart_sec: float = Field(default=0.1, ge=0)
    load_state: Literal["loaded", "not-found", "masked"] = "loaded"
    active_state: Literal["active", "inactive", "failed"] = "inactive"
    sub_state: str | None = None
    unit_file_state: Literal["enabled", "disabled", "masked", "static"] = "disabled"
    preset: str = "enabled"
    wanted_by: str = "multi-user.target"
    fragment_path: str | None = None
    active_enter_s_after_boot: float = 30.0
    n_restarts: int = 0
    stop_delay_s: float = Field(default=0.0, ge=0, le=600)
    restarts: list[str] = Field(default_factory=list)  # watchdog: starts these after a stop
    restart_delay_s: float = Field(default=0.5, ge=0)
    gpu_memory_mib: int | list[int] | dict[int, int] = 0  # for processes started later
    rss_kib: int = 1_048_576
    timeout_stop_sec: float = Field(default=90.0, ge=0)
    fail_verbs: list[str] = Field(default_factory=list)  # systemctl verbs refused for it
    processes_hidden: bool = False  # the processes it starts are hidden (ProcessSpec.hidden)


class FilesystemSpec(StrictModel):
    mount: str
    device: str
    type: str = "ext4"
    size: str | int
    used: str | int
    reserved_pct: float = Field(default=0.0, ge=0, le=50)
    inodes: int = 1_000_000
    inodes_used: int = 10_000


class DeletedFileSpec(StrictModel):
    pid: int
    fd: int = 5
    mode: Literal["r", "w", "u"] = "w"
    path: str
    size: str | int


class FileSpec(StrictModel):
    """A real (sparse) file created in the host's sandbox root (``bot.sim.sandbox``)."""

    path: str = Field(pattern=r"^/")
    size: str | int
    age_days: float = Field(default=0.0, ge=0)
    owner: str = "root"
    open_by: int | None = None  # PID that holds it open (lsof lists it)


class ContainerSpec(StrictModel):
    id: str
    name: str
    image: str
    command: str = ""
    restart_policy: Literal["no", "always", "unless-stopped", "on-failure"] = "no"
    running: bool = True
    created_s_before_boot: float = 86400.0
    ports: str = ""
    pid: int = 0
    gpus: bool = False  # `docker run --gpus all`: inspect shows the device request


class IbPortSpec(StrictModel):
    """One InfiniBand (or RoCE) port: what ``ibstat`` prints and sysfs holds."""

    ca: str = Field(default="mlx5_0", pattern=r"^[A-Za-z0-9_]{1,32}$")
    port: int = Field(default=1, ge=1, le=4)
    state: Literal["Active", "Down", "Initializing", "Armed"] = "Active"
    phys_state: Literal["LinkUp", "Polling", "Disabled", "Sleep", "LinkErrorRecovery"] = "LinkUp"
    rate: int = 400
    link_layer: Literal["InfiniBand", "Ethernet"] = "InfiniBand"
    link_downed: int = Field(default=0, ge=0)
    symbol_error: int = Field(default=0, ge=0)


class DcgmFailure(StrictModel):
    level: int = Field(default=1, ge=1, le=4)  # the first -r level whose run includes the test
    test: str = "software"
    gpus: list[int] = Field(default_factory=lambda: [0])
    warning: str = ""


class DcgmSpec(StrictModel):
    """``dcgmi`` on the host: absent unless ``installed``; ``diag -r N -j`` answers 4.x JSON."""

    installed: bool = False
    version: str = "4.2.3"
    failures: list[DcgmFailure] = Field(default_factory=list)
    runtime_error: str = ""


class SmokeGpuSpec(StrictModel):
    matmul_tflops: float | None = None
    mem_gbps: float | None = None
    h2d_gbps: float | None = None
    errors: list[str] = Field(default_factory=list)


class SmokeSpec(StrictModel):
    """What ``playbooks/smoke/gpu_smoke.py`` prints on this host (the sim runs no CUDA)."""

    torch: bool = True  # importable
    cuda: bool = True  # torch sees the GPUs
    matmul_tflops: float = 640.0
    mem_gbps: float = 2900.0
    h2d_gbps: float = 52.0
    gpus: dict[int, SmokeGpuSpec] = Field(default_factory=dict)


class PreviousBoot(StrictModel):
    id: str | None = None
    duration_s: float = Field(default=86400.0, gt=0)
    gap_s: float = Field(default=120.0, ge=0)  # between its end and the next boot
    clean: bool = True
    last_lines: list[str] = Field(default_factory=list)


class BootSpec(StrictModel):
    id: str | None = None
    uptime_s: float = Field(default=1380.0, ge=1)
    previous: list[PreviousBoot] = Field(default_factory=list)  # newest first


class JournalSpec(StrictModel):
    disk_usage: str | int = "512M"
    path: str = "/var/log/journal"
    lines: list[str] = Field(default_factory=list)


class SshdSpec(StrictModel):
    max_sessions: int = Field(default=10, ge=1, le=1000)
    max_startups: str = "200:30:400"
    fast_kex: bool = True  # drop sntrup761 (post-quantum) key exchange: ~100 ms a connection


# programs a stub must not answer: the tools with a model of their own, and the shell
# machinery every session runs through
NOT_STUBBED = frozenset({"sh", "bash", "dash", "env", "timeout", "sudo", "printf", "cat", "echo",
                         "test", "true", "false", "sim-session"})
STUB_PROGRAM_RE = r"^[A-Za-z0-9][A-Za-z0-9._+-]{0,63}$"


class CommandAnswer(StrictModel):
    """What a stubbed command prints and exits with."""

    stdout: str = ""
    stderr: str = ""
    exit_status: int = Field(default=0, ge=0, le=255)


class CommandSpec(CommandAnswer):
    """A command the host answers through a stub (an extension's own program): keyed by
    its exact words; ``then`` replaces other commands' answers once it has run (a restart
    that makes the status command say "running")."""

    then: dict[str, CommandAnswer] = Field(default_factory=dict)


class Scenario(StrictModel):
    host: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9.-]{0,62}$")
    description: str = ""
    kernel: str = "6.1.0-41-amd64"
    systemd: bool = True
    nvidia: NvidiaSpec = Field(default_factory=NvidiaSpec)
    gpus: list[GpuSpec] = Field(default_factory=list)
    base_processes: bool = True
    processes: list[ProcessSpec] = Field(default_factory=list)
    units: dict[str, UnitSpec] = Field(default_factory=dict)
    crontabs: dict[str, list[str]] = Field(default_factory=dict)
    filesystems: list[FilesystemSpec] = Field(default_factory=list)
    dirs: dict[str, str | int] = Field(default_factory=dict)
    deleted_files: list[DeletedFileSpec] = Field(default_factory=list)
    files: list[FileSpec] = Field(default_factory=list)
    sudo_denied: list[str] = Field(default_factory=list)  # command prefixes sudo -l refuses
    sudo_refuses: bool = False  # no sudoers rule for the login: every `sudo -n` is refused
    containers: list[ContainerSpec] = Field(default_factory=list)
    boot: BootSpec = Field(default_factory=BootSpec)
    journal: JournalSpec = Field(default_factory=JournalSpec)
    dmesg: list[str] = Field(default_factory=list)
    memory_total: str | int = "1T"
    memory_used: str | int = "48G"
    sshd: SshdSpec = Field(default_factory=SshdSpec)
    infiniband: list[IbPortSpec] = Field(default_factory=list)
    dcgm: DcgmSpec = Field(default_factory=DcgmSpec)
    smoke: SmokeSpec = Field(default_factory=SmokeSpec)
    commands: dict[str, CommandSpec] = Field(default_factory=dict)  # stubbed programs

    @field_validator("commands")
    @classmethod
    def _stubbed(cls, v: dict[str, CommandSpec]) -> dict[str, CommandSpec]:
        import re

        from bot.sim.run import TOOLS

        for line in [*v, *(k for c in v.values() for k in c.then)]:
            program = line.split(" ", 1)[0]
            if not re.match(STUB_PROGRAM_RE, program) or line != " ".join(line.split()):
                raise ValueError(f"{line!r}: a program name and its words, one space apart")
            if program in TOOLS or program in NOT_STUBBED:
                raise ValueError(f"{program!r} is answered by the host's own model, not a stub")
        return v

    @field_validator("units")
    @classmethod
    def _unit_names(cls, v: dict[str, UnitSpec]) -> dict[str, UnitSpec]:
        for name in v:
            if "." not in name:
                raise ValueError(f"unit {name!r} needs a suffix such as .service")
        return v


_SUFFIX = {"K": 1, "M": 2, "G": 3, "T": 4, "P": 5}


def parse_size(value: str | int) -> int:
    """'15T' / '512M' / '7.3T' / 1234 (bytes), binary units like df -h prints them."""
    if isinstance(value, int):
        return value
    text = value.strip().upper().removesuffix("IB").removesuffix("B")
    if text and text[-1] in _SUFFIX:
        return int(float(text[:-1]) * 1024 ** _SUFFIX[text[-1]])
    return int(float(text))


def merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """Deep-merge ``over`` into a copy of ``base``; lists and scalars are replaced, except
    ``processes``, merged by pid (so a scenario can add one process to its base)."""
    out = copy.deepcopy(base)
    for key, val in over.items():
        if isinstance(val, dict) and isinstance(out.get(key), dict):
            out[key] = merge(out[key], val)
        elif key == "processes" and isinstance(val, list) and isinstance(out.get(key), list):
            pids = {p.get("pid") for p in val if isinstance(p, dict)}
            out[key] = [p for p in out[key] if p.get("pid") not in pids] + copy.deepcopy(val)
        else:
            out[key] = copy.deepcopy(val)
    return out


def resolve_path(scenario: str | Path) -> Path:
    """A shipped name (``seed``) or a path to a YAML file."""
    path = Path(scenario)
    if path.suffix in (".yaml", ".yml") or path.exists():
        if not path.is_file():
            raise UserError(f"scenario file not found: {path}", 2)
        return path
    shipped = SCENARIO_DIR / f"{scenario}.yaml"
    if not shipped.is_file():
        raise UserError(f"unknown scenario {scenario!r}; shipped: {', '.join(shipped_names())}", 2)
    return shipped


def shipped_names() -> list[str]:
    return sorted(p.stem for p in SCENARIO_DIR.glob("*.yaml"))


def _read_raw(path: Path, depth: int = 0) -> dict[str, Any]:
    """The YAML mapping, with ``extends: NAME`` resolved (the base merged underneath)."""
    try:
        raw = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as exc:
        raise UserError(f"{path}: not valid YAML: {exc}", 2) from None
    except OSError as exc:
        raise UserError(f"{path}: cannot read scenario: {exc.strerror}", 2) from None
    if not isinstance(raw, dict):
        raise UserError(f"{path}: top level must be a mapping", 2)
    base = raw.pop("extends", None)
    if base is None:
        return raw
    if depth > 4 or not isinstance(base, str):
        raise UserError(f"{path}: key 'extends': must name one scenario (at most 4 deep)", 2)
    return merge(_read_raw(resolve_path(base), depth + 1), raw)


def load_scenario(scenario: str | Path, overrides: dict[str, Any] | None = None,
                  canary: str | None = None) -> Scenario:
    """Read, merge overrides and validate; errors name the file and the key.

    Hostile scenarios write ``{canary}``; it becomes ``canary`` (a path) before anything
    else sees the text, so names are truncated as the real tools would truncate them.
    """
    path = resolve_path(scenario)
    raw = _read_raw(path)
    if overrides:
        raw = merge(raw, overrides)
    if canary is not None:
        raw = json.loads(json.dumps(raw).replace("{canary}", json.dumps(canary)[1:-1]))
    try:
        return Scenario.model_validate(raw)
    except ValidationError as exc:
        err = exc.errors()[0]
        key = ".".join(str(p) for p in err["loc"]) or "(top level)"
        raise UserError(f"{path}: key '{key}': {err['msg']}", 2) from None
