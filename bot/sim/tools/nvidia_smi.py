"""``nvidia-smi``: the summary table, ``--query-gpu``/``--query-compute-apps`` CSV, ``-L``,
``-i`` and ``-l``/``-lms`` loops, in the formats of driver 550-580 (see docs/simulated-hosts.md
for what is approximate). Memory used is the reserved baseline plus what processes hold.
"""

from __future__ import annotations

import itertools
import time

from bot.sim.engine import gpu_processes, gpu_used_mib

TYPE_CHECKING = False  # typing costs every sim command ~5 ms (bot.sim.state)
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

    from bot.sim.state import SimCall, State

    Gpu = dict[str, Any]
    Getter = Callable[[State, Gpu, float], Any]  # value(state, gpu, now)

EXIT_INVALID_ARG = 2
EXIT_NO_PERMISSION = 4
EXIT_NO_DEVICE = 6
EXIT_GPU_LOST = 15
EXIT_LIB_MISMATCH = 18


def _ts(now: float) -> str:
    return time.strftime("%Y/%m/%d %H:%M:%S", time.gmtime(now)) + f".{int(now * 1000) % 1000:03d}"


def _mem(key: str) -> Getter:
    def get(state: State, g: Gpu, now: float) -> int:
        used = gpu_used_mib(state, g["index"])
        total = int(g["memory_total_mib"])
        return {"total": total, "used": used, "free": total - used,
                "reserved": int(g["memory_reserved_mib"])}[key]
    return get


GPU_FIELDS: dict[str, tuple[str, Getter]] = {  # field -> (unit or "", getter)
    "timestamp": ("", lambda s, g, now: _ts(now)),
    "driver_version": ("", lambda s, g, now: s["nvidia"]["driver_version"]),
    "count": ("", lambda s, g, now: len(s["gpus"])),
    "index": ("", lambda s, g, now: g["index"]),
    "name": ("", lambda s, g, now: g["name"]),
    "uuid": ("", lambda s, g, now: g["uuid"]),
    "pci.bus_id": ("", lambda s, g, now: g["bus_id"]),
    "memory.total": ("MiB", _mem("total")),
    "memory.used": ("MiB", _mem("used")),
    "memory.free": ("MiB", _mem("free")),
    "memory.reserved": ("MiB", _mem("reserved")),
    "utilization.gpu": ("%", lambda s, g, now: g["utilization_gpu"]),
    "utilization.memory": ("%", lambda s, g, now: g["utilization_memory"]),
    "power.draw": ("W", lambda s, g, now: f"{g['power_draw_w']:.2f}"),
    "power.limit": ("W", lambda s, g, now: f"{g['power_limit_w']:.2f}"),
    "temperature.gpu": ("", lambda s, g, now: g["temperature_c"]),
    "persistence_mode": ("", lambda s, g, now: g["persistence_mode"]),
    "compute_mode": ("", lambda s, g, now: g["compute_mode"]),
    "pstate": ("", lambda s, g, now: g["perf"]),
    "fan.speed": ("%", lambda s, g, now: "[N/A]" if g["fan"] == "N/A" else g["fan"]),
    "ecc.errors.uncorrected.volatile.total": ("", lambda s, g, now: g["ecc_errors"]),
    # an idle GPU power-manages its link down to gen 1, as real ones do
    "pcie.link.gen.current": ("", lambda s, g, now: g["pcie_gen"] if g["utilization_gpu"] else 1),
    "pcie.link.gen.max": ("", lambda s, g, now: g["pcie_gen_max"]),
    "pcie.link.width.current": ("", lambda s, g, now: g["pcie_width"]),
    "pcie.link.width.max": ("", lambda s, g, now: g["pcie_width_max"]),
}
GPU_ALIASES = {"gpu_name": "name", "gpu_uuid": "uuid", "gpu_bus_id": "pci.bus_id",
               "persistence-mode": "persistence_mode", "utilization.gpu": "utilization.gpu"}

APP_FIELDS: dict[str, tuple[str, str]] = {  # field -> (header, unit)
    "timestamp": ("timestamp", ""), "pid": ("pid", ""), "process_name": ("process_name", ""),
    "name": ("process_name", ""), "used_memory": ("used_gpu_memory", "MiB"),
    "used_gpu_memory": ("used_gpu_memory", "MiB"), "gpu_uuid": ("gpu_uuid", ""),
    "gpu_bus_id": ("gpu_bus_id", ""), "gpu_name": ("gpu_name", ""),
}


class SmiUsageError(Exception):
    """A command line the real tool rejects: message for stdout, exit status."""

    def __init__(self, message: str, code: int = EXIT_INVALID_ARG) -> None:
        super().__init__(message)
        self.code = code


def _cell(value: Any, unit: str, nounits: bool) -> str:
    text = str(value)
    return text if nounits or not unit or text.startswith("[") else f"{text} {unit}"


def _check_fields(fields: list[str], known: Any) -> None:
    for f in fields:
        if f not in known:
            raise SmiUsageError(f'Field "{f}" is not a valid field to query.\n\n')


def query_gpu(state: State, gpus: list[Gpu], fields: list[str], fmt: set[str], now: float) -> str:
    """CSV rows for ``--query-gpu``; header keeps the units even with ``nounits``."""
    names = [GPU_ALIASES.get(f, f) for f in fields]
    _check_fields(names, GPU_FIELDS)
    lines = []
    if "noheader" not in fmt:
        lines.append(", ".join(f"{f} [{GPU_FIELDS[n][0]}]" if GPU_FIELDS[n][0] else f
                               for f, n in zip(fields, names, strict=True)))
    for g in gpus:
        lines.append(", ".join(_cell(GPU_FIELDS[n][1](state, g, now), GPU_FIELDS[n][0],
                                     "nounits" in fmt) for n in names))
    return "".join(line + "\n" for line in lines)


def _app_value(field: str, proc: dict[str, Any], mib: int, g: Gpu, now: float) -> Any:
    return {"timestamp": _ts(now), "pid": proc["pid"],
            "process_name": proc["args"].split(" ", 1)[0], "used_gpu_memory": mib,
            "gpu_uuid": g["uuid"], "gpu_bus_id": g["bus_id"], "gpu_name": g["name"]}[field]


def query_apps(state: State, gpus: list[Gpu], fields: list[str], fmt: set[str], now: float) -> str:
    """CSV for ``--query-compute-apps``: one row per (process, GPU); none in a container."""
    _check_fields(fields, APP_FIELDS)
    lines = []
    if "noheader" not in fmt:
        lines.append(", ".join(f"{APP_FIELDS[f][0]} [{APP_FIELDS[f][1]}]" if APP_FIELDS[f][1]
                               else APP_FIELDS[f][0] for f in fields))
    if state["nvidia"]["sees_pids"]:
        for g in gpus:
            for proc, mib in gpu_processes(state, g["index"], listed=True):
                lines.append(", ".join(
                    _cell(_app_value(APP_FIELDS[f][0], proc, mib, g, now), APP_FIELDS[f][1],
                          "nounits" in fmt) for f in fields))
    return "".join(line + "\n" for line in lines)


def list_gpus(gpus: list[Gpu]) -> str:
    return "".join(f"GPU {g['index']}: {g['name']} (UUID: {g['uuid']})\n" for g in gpus)


def select_gpus(state: State, ids: str | None) -> list[Gpu]:
    visible = [g for g in state["gpus"] if g.get("visible", True)]
    if ids is None:
        return visible
    chosen = []
    for ref in ids.split(","):
        ref = ref.strip()
        match = [g for g in visible
                 if ref in (str(g["index"]), g["uuid"], g["bus_id"], g["bus_id"][4:])]
        if not match:
            raise SmiUsageError("No devices were found\n", EXIT_NO_DEVICE)
        chosen.extend(match)
    return chosen


def _take(argv: list[str], i: int, flag: str) -> tuple[str, int]:
    arg = argv[i]
    if "=" in arg and arg.startswith("--"):
        return arg.split("=", 1)[1], i + 1
    if i + 1 >= len(argv):
        raise SmiUsageError(f'Option "{flag}" requires a value.\n\n'
                    "Please run 'nvidia-smi -h' for help.\n")
    return argv[i + 1], i + 2


_VALUE_FLAGS = {"--query-gpu": "query_gpu", "--query-compute-apps": "query_apps",
                "--format": "format", "-i": "id", "--id": "id", "-l": "loop",
                "--loop": "loop", "-lms": "loop_ms", "--loop-ms": "loop_ms",
                "-f": "file", "--filename": "file"}


def parse_args(argv: list[str]) -> dict[str, Any]:
    opts: dict[str, Any] = {}
    i = 0
    while i < len(argv):
        arg = argv[i]
        key = arg.split("=", 1)[0]
        if key in _VALUE_FLAGS:
            if key in ("-l", "--loop") and (i + 1 >= len(argv) or not argv[i + 1].isdigit()) \
                    and "=" not in arg:
                opts["loop"], i = "5", i + 1
                continue
            opts[_VALUE_FLAGS[key]], i = _take(argv, i, key)
        elif arg in ("-q", "--query"):
            opts["query"], i = True, i + 1
        elif arg in ("-x", "--xml-format"):
            opts["xml"], i = True, i + 1
        elif arg in ("-L", "--list-gpus"):
            opts["list"], i = True, i + 1
        elif arg in ("-h", "--help"):
            opts["help"], i = True, i + 1
        else:
            raise SmiUsageError("Invalid combination of input arguments. "
                                "Please run 'nvidia-smi -h' for help.\n")
    return opts


def render_once(state: State, opts: dict[str, Any], now: float) -> str:
    chosen = select_gpus(state, opts.get("id"))
    gpus = [g for g in chosen if not g.get("lost")]
    lost = "".join(f"Unable to determine the device handle for GPU {g['bus_id'][4:]}: "
                   "Unknown Error\n" for g in chosen if g.get("lost"))
    return lost + _render(state, opts, gpus, now)


def _render(state: State, opts: dict[str, Any], gpus: list[Gpu], now: float) -> str:
    """One report; the table and XML formatters are imported only by the calls that print them."""
    if opts.get("query") and opts.get("xml"):
        from bot.sim.tools.nvidia_xml import xml_report

        return xml_report(state, gpus, now)
    fmt = {p.strip() for p in opts.get("format", "").split(",") if p.strip()}
    if ("query_gpu" in opts or "query_apps" in opts) and "csv" not in fmt:
        raise SmiUsageError('"--format=csv" must be specified with the "--query-*" switches.\n\n'
                    "Please run 'nvidia-smi -h' for help.\n")
    if "query_gpu" in opts:
        return query_gpu(state, gpus, _fields(opts["query_gpu"]), fmt, now)
    if "query_apps" in opts:
        return query_apps(state, gpus, _fields(opts["query_apps"]), fmt, now)
    if opts.get("list"):
        return list_gpus(gpus)
    from bot.sim.tools.nvidia_table import table

    return table(state, gpus, now)


def _fields(text: str) -> list[str]:
    return [f.strip() for f in text.split(",") if f.strip()]


def _with_sample(state: State, sample: int | None) -> State:
    if sample is None:
        return state
    return {**state, "gpus": [{**g, "utilization_gpu": sample} for g in state["gpus"]]}


def nvlink(argv: list[str], ctx: SimCall) -> int:
    """``nvidia-smi nvlink -e`` (``--errorcounters``): three counters per link, as drivers
    535-580 print them; a GPU without NVLink prints its header only."""
    if not {"-e", "--errorcounters"} & set(argv):
        ctx.print("Invalid combination of input arguments. Please run 'nvidia-smi nvlink -h' "
                  "for help.")
        return EXIT_INVALID_ARG
    state = ctx.read()
    failed = _failure(ctx, state["nvidia"])
    if failed is not None:
        return failed
    for g in select_gpus(state, None):
        if g.get("lost"):
            continue
        ctx.print(f"GPU {g['index']}: {g['name']} (UUID: {g['uuid']})")
        errors = g.get("nvlink_errors") or {}
        for link in range(int(g.get("nvlink_links") or 0)):
            counts = errors.get(str(link)) or {}
            for counter in ("Replay Errors", "Recovery Errors", "CRC Errors"):
                ctx.print(f"\t Link {link}: {counter}: {int(counts.get(counter, 0))}")
    return 0


def main(argv: list[str], ctx: SimCall) -> int:
    from bot.sim.tools import gpu_reset

    if gpu_reset.wanted(argv):
        return gpu_reset.main(argv, ctx)
    if argv[:1] == ["nvlink"]:
        return nvlink(argv[1:], ctx)
    try:
        opts = parse_args(argv)
        state = ctx.read()  # once: each read is a file load and due events applied
        if opts.get("help"):
            ctx.print("NVIDIA System Management Interface -- v" +
                      state["nvidia"]["driver_version"])
            return 0
        failed = _failure(ctx, state["nvidia"])
        if failed is not None:
            return failed
        interval = _interval(opts)
        if interval is None:
            ctx.out.write(render_once(state, opts, ctx.now()))
            return EXIT_GPU_LOST if any(g.get("lost") for g in select_gpus(
                state, opts.get("id"))) else 0
        return _loop(ctx, opts, interval)
    except SmiUsageError as exc:
        ctx.out.write(str(exc))
        return exc.code


def _failure(ctx: SimCall, nv: dict[str, Any]) -> int | None:
    """Failure modes of the whole tool: a hang, a login without access to the devices,
    a driver/library mismatch."""
    if nv.get("hang_s"):
        ctx.sleep(float(nv["hang_s"]))
    if nv.get("denied"):  # tests/fixtures/real/smi_nvml_insufficient_permissions.txt
        ctx.out.write("Failed to initialize NVML: Insufficient Permissions\n")
        return EXIT_NO_PERMISSION
    lib = nv.get("library_version")
    if lib and lib != nv["driver_version"]:
        short = ".".join(lib.split(".")[:2])
        ctx.out.write("Failed to initialize NVML: Driver/library version mismatch\n"
                      f"NVML library version: {short}\n")
        return EXIT_LIB_MISMATCH
    return None


def _interval(opts: dict[str, Any]) -> float | None:
    try:
        if "loop_ms" in opts:
            return max(int(opts["loop_ms"]), 1) / 1000
        if "loop" in opts:
            return float(max(int(opts["loop"]), 1))
    except ValueError:
        raise SmiUsageError("Invalid combination of input arguments. Please run 'nvidia-smi -h' "
                    "for help.\n") from None
    return None


def _loop(ctx: SimCall, opts: dict[str, Any], interval: float) -> int:
    """Print until killed (or the reader goes away), like the real ``-l``."""
    samples = ctx.read()["nvidia"].get("utilization_samples") or []
    cycle = itertools.cycle(samples) if samples else itertools.repeat(None)
    first = True
    for sample in cycle:
        text = render_once(_with_sample(ctx.read(), sample), opts, ctx.now())
        if not first and "query_gpu" in opts and "noheader" not in opts.get("format", ""):
            text = text.split("\n", 1)[1]
        try:
            ctx.out.write(text)
            ctx.out.flush()
        except BrokenPipeError:
            return 0
        first = False
        ctx.sleep(interval)
    return 0
