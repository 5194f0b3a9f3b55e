"""What ``playbooks/smoke/gpu_smoke.py`` printed: one record per GPU, its error, its end.

Lines that are not the script's JSON (a warning torch printed, a banner) are skipped; a run
without its ``done`` line was cut short (killed at its deadline, the host went away) and is
incomplete, never a pass.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

MAX_LINES = 512


@dataclass(frozen=True)
class SmokeGpu:
    gpu: int
    uuid: str = ""
    name: str = ""
    matmul_tflops: float | None = None
    mem_gbps: float | None = None
    h2d_gbps: float | None = None
    mem_checked_gib: float | None = None
    errors: tuple[str, ...] = ()
    seconds: float | None = None

    @property
    def key(self) -> str:
        """What a baseline is kept under: the GPU's UUID (it follows the board), else its index."""
        return self.uuid or f"index:{self.gpu}"

    def to_json(self) -> dict[str, Any]:
        return {"gpu": self.gpu, "uuid": self.uuid, "name": self.name,
                "matmul_tflops": self.matmul_tflops, "mem_gbps": self.mem_gbps,
                "h2d_gbps": self.h2d_gbps, "mem_checked_gib": self.mem_checked_gib,
                "errors": list(self.errors), "seconds": self.seconds}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> SmokeGpu:
        def num(key: str) -> float | None:
            value = d.get(key)
            if isinstance(value, int | float) and not isinstance(value, bool):
                return float(value)
            return None

        return cls(int(d.get("gpu", -1)), str(d.get("uuid") or ""), str(d.get("name") or "")[:80],
                   num("matmul_tflops"), num("mem_gbps"), num("h2d_gbps"),
                   num("mem_checked_gib"),
                   tuple(str(e)[:300] for e in d.get("errors") or [] if e), num("seconds"))


@dataclass(frozen=True)
class SmokeReport:
    gpus: list[SmokeGpu] = field(default_factory=list)
    error: str | None = None  # the script could not start (no torch, no CUDA device)
    done: bool = False
    torch: str = ""


def parse_smoke(text: str) -> SmokeReport:
    gpus: list[SmokeGpu] = []
    error, done, torch = None, False, ""
    for line in text.splitlines()[:MAX_LINES]:
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            d = json.loads(line)
        except ValueError:
            continue
        if not isinstance(d, dict) or d.get("smoke") != 1:
            continue
        if "error" in d:
            error = str(d["error"])[:300]
        elif d.get("done"):
            done, torch = True, str(d.get("torch") or "")[:40]
        elif isinstance(d.get("gpu"), int):
            gpus.append(SmokeGpu.from_json(d))
    return SmokeReport(gpus, error, done, torch)
