"""nvidia-smi query output (``--format=csv`` with or without ``noheader``/``nounits``).

Fields are requested in a fixed order so free text (GPU and process names, which may
hold commas) sits where it can be re-joined. Samples from a loop (``-lms``, or several
runs separated by ``---``) are split where a GPU index repeats.

A row parser returns rows, or the tool's error (``SmiError``) when the output holds no
row but nvidia-smi's own words: "Failed to initialize NVML: ..." is never an empty list,
which would read as "no GPUs".
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from bot.domain.host_state import GpuState
from playbooks.commands import QUERY_APPS_FIELDS, QUERY_GPU_FIELDS
from playbooks.parsers.common import integer, lines
from playbooks.parsers.smi_errors import SmiError, first_error

__all__ = ["QUERY_APPS_FIELDS", "QUERY_GPU_FIELDS", "ComputeApp", "GpuSample",
           "parse_compute_apps", "parse_gpu_reset", "parse_gpu_samples", "parse_gpu_states",
           "parse_query_gpu", "rows_of", "samples_of", "unread_lines"]
SAMPLE_SEPARATOR = "---"


@dataclass(frozen=True)
class GpuSample:
    index: int
    uuid: str
    name: str
    memory_used_mib: int | None
    memory_total_mib: int | None
    utilization_pct: int | None

    @property
    def memory_fraction(self) -> float | None:
        if self.memory_used_mib is None or not self.memory_total_mib:
            return None
        return self.memory_used_mib / self.memory_total_mib


@dataclass(frozen=True)
class ComputeApp:
    pid: int | None
    gpu_uuid: str
    used_memory_mib: int | None
    process_name: str


_ALIASES = {"used_gpu_memory": "used_memory", "gpu_name": "name"}
# Field names a header line may start with (data rows start with a number or a value).
_HEADER_FIRST = frozenset({
    "index", "uuid", "name", "memory.used", "memory.total", "memory.free", "utilization.gpu",
    "utilization.memory", "timestamp", "pci.bus_id", "driver_version", "temperature.gpu",
    "power.draw", "pid", "gpu_uuid", "used_memory", "process_name", "gpu_bus_id",
})


def _field_name(header_cell: str) -> str:
    """``'memory.used [MiB]'`` -> ``'memory.used'`` (headers carry units in brackets)."""
    name = header_cell.split("[", 1)[0].strip().lower()
    return _ALIASES.get(name, name)


def _csv_rows(text: str, default: str) -> list[dict[str, str] | None]:
    """Rows as field -> text; a header line (if any) sets the order, else ``default``.

    The last field takes any extra commas (it is the free-text name). ``None`` marks a
    ``---`` sample separator.
    """
    fields = default.split(",")
    rows: list[dict[str, str] | None] = []
    for line in lines(text):
        if line.strip() == SAMPLE_SEPARATOR:
            rows.append(None)
            continue
        cells = [c.strip() for c in line.split(",")]
        if _field_name(cells[0]) in _HEADER_FIRST:
            fields = [_field_name(c) for c in cells]
            continue
        if len(cells) < len(fields):
            continue
        head = cells[: len(fields) - 1]
        rows.append(dict(zip(fields, [*head, ", ".join(cells[len(fields) - 1:])], strict=True)))
    return rows


def unread_lines(text: str) -> list[str]:
    """Lines that are neither a header, a separator nor a GPU row: what the row parser
    would drop. The health playbook quotes them instead of reporting "no GPUs"."""
    out = []
    for line in lines(text):
        cells = [c.strip() for c in line.split(",")]
        if line.strip() == SAMPLE_SEPARATOR or _field_name(cells[0]) in _HEADER_FIRST:
            continue
        if len(cells) < 3 or integer(cells[0]) is None:
            out.append(line.strip())
    return out


def _gpu_row(row: dict[str, str]) -> GpuSample | None:
    index = integer(row.get("index", ""))
    if index is None or index < 0:
        return None
    return GpuSample(
        index=index, uuid=row.get("uuid", ""), name=row.get("name", ""),
        memory_used_mib=integer(row.get("memory.used", "")),
        memory_total_mib=integer(row.get("memory.total", "")),
        utilization_pct=integer(row.get("utilization.gpu", "")),
    )


def parse_query_gpu(text: str) -> list[GpuSample] | SmiError:
    """One ``GpuSample`` per GPU row (every row, across loop iterations too); the tool's
    error when there is no row and nvidia-smi said why."""
    rows = [r for r in _rows(text) if r is not None]
    return rows or first_error(text) or rows


def rows_of(parsed: list[GpuSample] | SmiError) -> list[GpuSample]:
    """The rows of a parse, none for the tool's error (which its caller reports)."""
    return [] if isinstance(parsed, SmiError) else parsed


def _rows(text: str) -> list[GpuSample | None]:
    return [_gpu_row(r) for r in _csv_rows(text, QUERY_GPU_FIELDS) if r is not None]


def parse_gpu_states(text: str) -> list[GpuState]:
    """Per-GPU memory as remediation compares it: rows with both memory figures (``[N/A]``
    rows are left out)."""
    return [GpuState(g.index, g.uuid, float(g.memory_used_mib), float(g.memory_total_mib))
            for g in rows_of(parse_query_gpu(text))
            if g.memory_used_mib is not None and g.memory_total_mib is not None]


def parse_gpu_samples(text: str) -> list[list[GpuSample]] | SmiError:
    """Rows grouped into samples: a ``---`` line or a repeated index starts a new one;
    the tool's error when there is no row and nvidia-smi said why."""
    samples: list[list[GpuSample]] = []
    current: list[GpuSample] = []
    for raw in _csv_rows(text, QUERY_GPU_FIELDS):
        row = _gpu_row(raw) if raw is not None else None
        if raw is None or (row is not None and any(r.index == row.index for r in current)):
            if current:
                samples.append(current)
            current = []
        if row is not None:
            current.append(row)
    if current:
        samples.append(current)
    return samples or first_error(text) or samples


def samples_of(parsed: list[list[GpuSample]] | SmiError) -> list[list[GpuSample]]:
    return [] if isinstance(parsed, SmiError) else parsed


def _app_row(row: dict[str, str]) -> ComputeApp | None:
    raw_pid = row.get("pid", "")
    pid = integer(raw_pid)
    if pid is None and raw_pid.strip() not in ("[N/A]", "N/A"):
        return None
    if pid is not None and pid <= 0:
        return None
    return ComputeApp(pid=pid, gpu_uuid=row.get("gpu_uuid", ""),
                      used_memory_mib=integer(row.get("used_memory", "")),
                      process_name=row.get("process_name", row.get("name", "")))


def parse_compute_apps(text: str) -> list[ComputeApp]:
    """``--query-compute-apps`` rows; 'No running processes found' and headers give nothing
    (the same run's errors are the GPU sampler's to report: it asks the same tool)."""
    rows = (_app_row(r) for r in _csv_rows(text, QUERY_APPS_FIELDS) if r is not None)
    return [r for r in rows if r is not None]


def max_utilization(samples: list[list[GpuSample]], index: int) -> int | None:
    """Highest utilization seen for one GPU across samples (None if never reported)."""
    seen = [g.utilization_pct for s in samples for g in s
            if g.index == index and g.utilization_pct is not None]
    return max(seen) if seen else None


@dataclass(frozen=True)
class ResetReport:
    """``nvidia-smi --gpu-reset -i N``: the GPUs it reset and those it refused, with why."""

    reset: tuple[str, ...]  # bus ids, as printed
    refused: tuple[tuple[str, str], ...]  # (bus id, the driver's words)


_RESET_OK = re.compile(r"^GPU (?P<bus>[0-9A-Fa-f:.]+) was successfully reset\.?$")
_RESET_NO = re.compile(r"^GPU (?P<bus>[0-9A-Fa-f:.]+): (?P<why>.+)$")


def parse_gpu_reset(text: str) -> ResetReport | SmiError | None:
    """What a reset said (tests/fixtures/real/nvidia_smi_gpu_reset_*.txt); the tool's
    error when it could not start; None for words it does not know."""
    rows = [line.strip() for line in lines(text)]
    ok = tuple(m["bus"] for m in map(_RESET_OK.match, rows) if m)
    after = rows[rows.index("The following GPUs could not be reset:") + 1:] \
        if "The following GPUs could not be reset:" in rows else []
    no = tuple((m["bus"], m["why"]) for m in map(_RESET_NO.match, after) if m)
    if ok or no:
        return ResetReport(ok, no)
    return first_error(text)
