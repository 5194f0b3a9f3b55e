"""systemctl output: ``show`` (Key=Value), ``list-units``, ``list-unit-files``, ``status``.

Unit names read here are untrusted text; callers validate them (``bot.domain.validate``)
before any of them reaches a command line.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

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


def _cells(line: str) -> list[str]:
    return line.lstrip(_BULLETS).split()


def parse_list_units(text: str) -> list[UnitRow]:
    """``list-units --no-legend --plain`` rows (a leading ● on failed units is dropped)."""
    rows = []
    for line in lines(text):
        cells = _cells(line)
        if len(cells) < 4 or cells[0] == "UNIT" or "." not in cells[0]:
            continue
        rows.append(UnitRow(cells[0], cells[1], cells[2], cells[3], " ".join(cells[4:])))
    return rows


def parse_list_unit_files(text: str) -> list[UnitFileRow]:
    """``list-unit-files --no-legend`` rows: UNIT STATE [PRESET]."""
    rows = []
    for line in lines(text):
        cells = _cells(line)
        if len(cells) < 2 or cells[0] == "UNIT" or "." not in cells[0]:
            continue
        rows.append(UnitFileRow(cells[0], cells[1], cells[2] if len(cells) > 2 else ""))
    return rows


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
