"""``dcgmi diag -r N -j``: DCGM's diagnostic as data, per test and per GPU.

Two shapes are in the field. DCGM 3.x writes ``{"DCGM GPU Diagnostic": {"test_categories":
[{"category", "tests": [{"name", "results": [{"gpu_ids"|"gpu_id", "status", "warnings"}]}]}]}}``
with statuses such as ``PASS``/``Pass``; DCGM 4.x (NVIDIA/DCGM ``dcgm_diag_schema.json``) renamed
the top key to ``"DCGM Diagnostic"``, names GPUs ``entity_group``/``entity_id`` and adds a
``test_summary.status`` per test. A run that could not start puts ``runtime_error`` where the
categories would be. Anything else (empty, truncated, not JSON) is ``error``, never a pass.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

MAX_JSON_CHARS = 2_000_000
TOP_KEYS = ("DCGM Diagnostic", "DCGM GPU Diagnostic")
NOT_INSTALLED = "dcgmi: not installed"


class DiagStatus(StrEnum):
    PASS = "pass"
    FAIL = "fail"
    WARN = "warn"
    SKIP = "skip"
    NOT_RUN = "not_run"
    OTHER = "other"


def _status(text: object) -> DiagStatus:
    word = str(text or "").strip().lower().replace(" ", "_")
    aliases = {"passed": "pass", "failed": "fail", "warning": "warn", "skipped": "skip"}
    word = aliases.get(word, word)
    return DiagStatus(word) if word in DiagStatus._value2member_map_ else DiagStatus.OTHER


@dataclass(frozen=True)
class DiagResult:
    """One test's outcome on one GPU (``gpu`` None: the whole run, as 3.x deployment rows)."""

    gpu: int | None
    status: DiagStatus
    warnings: tuple[str, ...] = ()


@dataclass(frozen=True)
class DiagTest:
    category: str
    name: str
    status: DiagStatus  # the test's summary (4.x), else the worst of its results
    results: tuple[DiagResult, ...] = ()

    @property
    def failed_gpus(self) -> list[int | None]:
        return [r.gpu for r in self.results if r.status is DiagStatus.FAIL]

    @property
    def warnings(self) -> list[str]:
        return [w for r in self.results for w in r.warnings]


@dataclass(frozen=True)
class DcgmDiag:
    tests: tuple[DiagTest, ...] = ()
    version: str = ""
    error: str | None = None  # why there is no verdict: runtime_error, not JSON, empty
    installed: bool = True

    @property
    def failed(self) -> list[DiagTest]:
        return [t for t in self.tests if t.status is DiagStatus.FAIL]

    @property
    def passed(self) -> bool:
        """A verdict exists, it ran at least one test, and none failed."""
        return self.installed and self.error is None and bool(self.tests) and not self.failed


_RANK = {DiagStatus.FAIL: 4, DiagStatus.WARN: 3, DiagStatus.OTHER: 2, DiagStatus.PASS: 1,
         DiagStatus.SKIP: 0, DiagStatus.NOT_RUN: 0}


def parse_diag_json(text: str) -> DcgmDiag:
    """The document ``dcgmi diag -j`` printed (pure; never raises)."""
    if NOT_INSTALLED in text[:200]:
        return DcgmDiag(installed=False, error="dcgmi is not installed")
    body = text[:MAX_JSON_CHARS]
    start = body.find("{")
    if start < 0:
        return DcgmDiag(error=f"no JSON in the output: {body.strip()[:120]!r}")
    try:
        doc = json.loads(body[start:])
    except ValueError as exc:
        return DcgmDiag(error=f"not a complete JSON document ({exc})")
    return _document(doc) if isinstance(doc, dict) else DcgmDiag(error="not a JSON object")


def _document(doc: dict[str, Any]) -> DcgmDiag:
    top = next((doc[k] for k in TOP_KEYS if isinstance(doc.get(k), dict)), None)
    version = str((doc.get("metadata") or {}).get("version") or doc.get("version") or "")
    if top is None:
        return DcgmDiag(version=version, error="no 'DCGM Diagnostic' section")
    if top.get("runtime_error"):
        return DcgmDiag(version=version, error=str(top["runtime_error"])[:500])
    tests = tuple(_test(str(c.get("category") or ""), t)
                  for c in top.get("test_categories") or [] if isinstance(c, dict)
                  for t in c.get("tests") or [] if isinstance(t, dict))
    return DcgmDiag(tests, version, None if tests else "the diagnostic reported no test")


def _test(category: str, t: dict[str, Any]) -> DiagTest:
    results = tuple(_result(r) for r in t.get("results") or [] if isinstance(r, dict))
    summary = t.get("test_summary")
    if isinstance(summary, dict) and summary.get("status") is not None:
        status = _status(summary["status"])
    else:
        status = max((r.status for r in results), key=_RANK.__getitem__, default=DiagStatus.OTHER)
    return DiagTest(category, str(t.get("name") or "?")[:80], status, results)


def _result(r: dict[str, Any]) -> DiagResult:
    raw = r.get("entity_id", r.get("gpu_id", r.get("gpu_ids")))
    text = str(raw) if raw is not None else ""
    gpu = int(text) if text.isdigit() and r.get("entity_group", "GPU") == "GPU" else None
    return DiagResult(gpu, _status(r.get("status")), _warnings(r.get("warnings")))


def _warnings(raw: object) -> tuple[str, ...]:
    if not isinstance(raw, list):
        return ()
    out = [str(w.get("warning", "")) if isinstance(w, dict) else str(w) for w in raw]
    return tuple(w[:300] for w in out if w)


def failure_lines(diag: DcgmDiag) -> list[str]:
    """``sm_stress failed on GPU 0, 2: Max stress level of 2128.7 did not exceed …``."""
    out = []
    for t in diag.failed:
        gpus = [g for g in t.failed_gpus if g is not None]
        where = f" on GPU {', '.join(map(str, gpus))}" if gpus else ""
        why = next(iter(t.warnings), "")
        out.append(f"{t.name} failed{where}" + (f": {why}" if why else ""))
    return out
