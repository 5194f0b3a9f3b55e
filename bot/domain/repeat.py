"""Repeat offenders, as data: the same hardware fault on the same node again within a
window after a health gate passed there means the repair did not hold. Pure.

A fault's key names what failed and where (``gpu.broken:0000:5d:00``, ``ib.port_down:mlx5_1/1``),
from the diagnosis's findings; faults of the environment or of software (heat, slowed
clocks, Fabric Manager, an application's Xid) are not kept: swapping the board fixes none
of them. ``offence`` finds, for the faults seen now, a gate that passed within the window
after the same fault was seen before: that node goes to RMA instead of back to work.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from bot.domain.findings import Diagnosis, Finding, Severity
from bot.domain.headline import broken_text

WEEK_S = 7 * 86400.0
# hardware findings whose return after a repair means the part is bad
HARDWARE = ("gpu.broken", "gpu.wedged", "gpu.missing", "nvlink.errors", "pcie.downtrained",
            "ib.port_down", "ib.link_flaps")


@dataclass(frozen=True)
class FaultSeen:
    key: str
    at: float
    incident: str = ""
    title: str = ""

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> FaultSeen:
        d = json.loads(text)
        return cls(str(d["key"]), float(d["at"]), str(d.get("incident") or ""),
                   str(d.get("title") or "")[:300])


@dataclass(frozen=True)
class GatePass:
    at: float
    incident: str = ""
    reached: int = 0

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> GatePass:
        d = json.loads(text)
        return cls(float(d["at"]), str(d.get("incident") or ""), int(d.get("reached") or 0))


@dataclass(frozen=True)
class RepeatOffence:
    """``key`` was seen at ``first_at`` (incident ``before``), a gate passed at ``passed_at``,
    and it is back at ``again_at`` (incident ``now``), within ``window_s``."""

    host: str
    key: str
    title: str
    first_at: float
    passed_at: float
    again_at: float
    before: str
    now: str
    window_s: float = WEEK_S

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> RepeatOffence:
        return cls(str(d["host"]), str(d["key"]), str(d.get("title") or ""),
                   float(d["first_at"]), float(d["passed_at"]), float(d["again_at"]),
                   str(d.get("before") or ""), str(d.get("now") or ""),
                   float(d.get("window_s") or WEEK_S))


def fault_key(f: Finding) -> str | None:
    """What failed and where, or None for a finding that is not a part's fault."""
    if f.code not in HARDWARE or f.severity is Severity.INFO:
        return None
    gpu = f.evidence.get("gpu")
    port = f.evidence.get("port")
    if isinstance(gpu, Mapping):
        where = str(gpu.get("bus") or f"index:{gpu.get('index')}")
    elif isinstance(port, Mapping):
        where = f"{port.get('ca')}/{port.get('port')}"
    else:
        where = "host"
    return f"{f.code}:{where}"


def faults_of(d: Diagnosis) -> dict[str, str]:
    """Each hardware fault's key and how a person names it (a broken GPU as its headline
    says it: "GPU 3 (5D:00.0) fell off the bus (Xid 79)"), in finding order."""
    out: dict[str, str] = {}
    for f in d.findings:
        key = fault_key(f)
        if key is None or key in out:
            continue
        gpu = f.evidence.get("gpu")
        named = broken_text(gpu) if f.code == "gpu.broken" and isinstance(gpu, Mapping) else None
        out[key] = named or f.title.splitlines()[0]
    return out


def offence(host: str, now_faults: Mapping[str, str], history: Sequence[FaultSeen],
            passes: Iterable[GatePass], now: float, incident: str,
            window_s: float = WEEK_S) -> RepeatOffence | None:
    """The first fault of ``now_faults`` that a gate within ``window_s`` had passed after."""
    recent = sorted((p for p in passes if 0 <= now - p.at <= window_s), key=lambda p: p.at)
    for key, title in now_faults.items():
        for gate in reversed(recent):
            before = [f for f in history if f.key == key and f.at < gate.at]
            if before:
                first = max(before, key=lambda f: f.at)
                return RepeatOffence(host, key, title, first.at, gate.at, now, first.incident,
                                     incident, window_s)
    return None
