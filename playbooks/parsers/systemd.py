"""systemctl output: ``show`` (Key=Value), ``list-units``, ``list-unit-files``, ``status``.

Unit names read here are untrusted text; callers validate them (``bot.domain.validate``)
before any of them reaches a command line.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from bot.domain.host_state import UnitState
from playbooks.parsers.common import lines

_BULLETS = "●*○×✗↻ "
_UNIT_AT_START = re.compile(r"^(.+?\.(?:service|scope))(?:/|$)")
_STATUS_HEAD = re.compile(r"^\s*[●*○×✗↻]?\s*(.+?)(?: - |$)")


@dataclass(frozen=True)
class UnitRow:
    unit: str
    load: str
    active: str
    sub: str
    description: str


@dataclass(frozen=True)
class UnitFileRow:
    unit: str
    state: str
    preset: str = ""


def parse_show(text: str) -> dict[str, str]:
    """``systemctl show -p A,B UNIT``: the first block of ``Key=Value`` lines."""
    blocks = parse_show_many(text)
    return blocks[0] if blocks else {}


def parse_show_many(text: str) -> list[dict[str, str]]:
    """Several units' ``show`` output, blocks separated by blank lines."""
    blocks: list[dict[str, str]] = []
    current: dict[str, str] = {}
    for line in text.splitlines():
        if not line.strip():
            if current:
                blocks.append(current)
            current = {}
            continue
        key, sep, value = line.partition("=")
        if sep and key and " " not in key:
            current[key] = value
    if current:
        blocks.append(current)
    return blocks


_SPAN = {"us": 1e-6, "usec": 1e-6, "ms": 1e-3, "msec": 1e-3, "s": 1.0, "sec": 1.0,
         "min": 60.0, "m": 60.0, "h": 3600.0, "hr": 3600.0, "d": 86400.0}
_SPAN_PART = re.compile(r"(\d+(?:\.\d+)?)\s*([a-z]*)")


def parse_timespan(text: str, default: float = 0.0) -> float:
    """systemd's time spans (``100ms``, ``10s``, ``1min 30s``, ``infinity``) in seconds."""
    text = text.strip().lower()
    if text == "infinity":
        return float("inf")
    parts = _SPAN_PART.findall(text)
    if not parts or _SPAN_PART.sub("", text).strip():
        return default
    total = 0.0
    for number, unit in parts:
        if unit not in _SPAN and unit != "":
            return default
        total += float(number) * _SPAN.get(unit, 1e-6 if unit == "" else 1.0)
    return total


def _count(text: str) -> int:
    return int(text) if text.isdigit() else 0


def unit_state(name: str, props: dict[str, str], pids: tuple[int, ...] = ()) -> UnitState:
    """A ``show`` block (``UNIT_STATE_PROPERTIES``) and the PIDs in the unit's cgroup as
    the state remediation captures, re-probes and verifies."""
    return UnitState(
        name=name, load_state=props.get("LoadState", ""), active_state=props.get("ActiveState", ""),
        sub_state=props.get("SubState", ""), unit_file_state=props.get("UnitFileState", ""),
        main_pid=_count(props.get("MainPID", "0")), restart=props.get("Restart", ""),
        fragment_path=props.get("FragmentPath", ""), pids=pids,
        restart_s=parse_timespan(props.get("RestartUSec", ""), 0.1),
        n_restarts=_count(props.get("NRestarts", "0")),
        timeout_stop_s=parse_timespan(props.get("TimeoutStopUSec", ""), 90.0))


def _cells(line: str) -> list[str]:
    return line.lstrip(_BULLETS).split()


def _unit_rows(text: str, min_cells: int) -> list[list[str]]:
    """The cells of each row that names a unit (headers and short rows left out): the
    one reading of ``list-units`` and ``list-unit-files`` tables."""
    rows = (_cells(line) for line in lines(text))
    return [c for c in rows if len(c) >= min_cells and c[0] != "UNIT" and "." in c[0]]


def parse_list_units(text: str) -> list[UnitRow]:
    """``list-units --no-legend --plain`` rows (a leading ● on failed units is dropped)."""
    return [UnitRow(c[0], c[1], c[2], c[3], " ".join(c[4:])) for c in _unit_rows(text, 4)]


def parse_list_unit_files(text: str) -> list[UnitFileRow]:
    """``list-unit-files --no-legend`` rows: UNIT STATE [PRESET]."""
    return [UnitFileRow(c[0], c[1], c[2] if len(c) > 2 else "") for c in _unit_rows(text, 2)]


def unit_from_status(text: str) -> str | None:
    """``systemctl status PID``'s first line names the unit: ``● foo.service - Desc``.

    Everything up to `` - `` is returned, even text no unit could be named: the caller
    validates, and a hostile name must be refused whole, not trimmed into a valid one.
    """
    for line in lines(text)[:1]:
        m = _STATUS_HEAD.match(line)
        name = m[1].strip() if m else ""
        if name.endswith((".service", ".scope", ".socket", ".timer", ".mount")):
            return name
    return None


def unit_from_cgroup(cgroup: str) -> str | None:
    """The innermost ``.service``/``.scope`` of a ``ps -o cgroup`` value (v1 or v2).

    ``0::/system.slice/vllm.service`` -> ``vllm.service``; on v1 the ``name=systemd``
    or unified entry is preferred. User sessions (``session-3.scope``) count too.
    """
    entries = [e for e in re.split(r",(?=\d+:)", cgroup) if e]  # v1 lists hierarchies
    preferred = [e for e in entries if e.startswith(("0::", "1:name=systemd:"))] or entries
    for entry in preferred:
        path = entry.split(":", 2)[-1].rstrip("/")
        _, slice_, rest = path.rpartition(".slice/")
        m = _UNIT_AT_START.match(rest if slice_ else path.rpartition("/")[2])
        if m:
            return m[1]
    return None


def docker_id_from_scope(unit: str) -> str | None:
    """``docker-<64 hex>.scope`` -> the container id."""
    m = re.fullmatch(r"docker-([0-9a-f]{12,64})\.scope", unit)
    return m[1] if m else None
