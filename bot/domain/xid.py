"""The Xid policy: per Xid its severity, whose fault it is (the application's or the
GPU's) and the step to take. Defaults follow NVIDIA's Xid catalogue (docs.nvidia.com/
deploy/xid-errors); ``extra.xid_policy.xids`` in the config overrides or adds entries.

Pure: no I/O. ``critical`` + ``gpu`` fault makes a GPU ``broken``; an application fault
never does (the process is to blame, the GPU keeps its verdict).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Any

from bot.core.errors import ConfigError


class Fault(StrEnum):
    APP = "app"
    GPU = "gpu"
    UNKNOWN = "unknown"


class XidStep(StrEnum):
    """What a person should do; ordered from least to most disruptive."""

    RESTART_APP = "restart_app"
    RESET_GPU = "reset_gpu"
    REBOOT = "reboot"
    DRAIN_AND_TICKET = "drain_and_ticket"
    INVESTIGATE = "investigate"


STEP_RANK = {XidStep.INVESTIGATE: 0, XidStep.RESTART_APP: 1, XidStep.RESET_GPU: 2,
             XidStep.REBOOT: 3, XidStep.DRAIN_AND_TICKET: 4}
SEVERITIES = ("info", "warning", "critical")


@dataclass(frozen=True)
class XidRule:
    xid: int
    title: str
    severity: str  # info | warning | critical
    fault: Fault
    step: XidStep

    @property
    def breaks_gpu(self) -> bool:
        return self.severity == "critical" and self.fault is Fault.GPU


def _r(xid: int, title: str, severity: str, fault: str, step: str) -> XidRule:
    return XidRule(xid, title, severity, Fault(fault), XidStep(step))


DEFAULT_RULES: tuple[XidRule, ...] = (
    _r(13, "graphics engine exception", "warning", "app", "restart_app"),
    _r(31, "GPU memory page fault", "warning", "app", "restart_app"),
    _r(43, "GPU stopped processing", "warning", "app", "restart_app"),
    _r(45, "preemptive cleanup, due to previous errors", "info", "app", "restart_app"),
    _r(48, "double-bit ECC error", "critical", "gpu", "reset_gpu"),
    _r(61, "internal micro-controller breakpoint/warning", "critical", "gpu", "reset_gpu"),
    _r(62, "internal micro-controller halt", "critical", "gpu", "reset_gpu"),
    _r(63, "ECC page retirement or row remapping recorded", "warning", "gpu", "reset_gpu"),
    _r(64, "ECC page retirement or row remapper failure", "critical", "gpu",
       "drain_and_ticket"),
    _r(68, "video processor exception", "warning", "app", "restart_app"),
    _r(69, "graphics engine class error", "warning", "app", "restart_app"),
    _r(74, "NVLink error", "critical", "gpu", "reset_gpu"),
    _r(79, "GPU has fallen off the bus", "critical", "gpu", "reboot"),
    _r(92, "high single-bit ECC error rate", "warning", "gpu", "drain_and_ticket"),
    _r(94, "contained ECC error", "warning", "gpu", "reset_gpu"),
    _r(95, "uncontained ECC error", "critical", "gpu", "reset_gpu"),
    _r(109, "context switch timeout", "warning", "app", "restart_app"),
    _r(119, "GSP RPC timeout", "critical", "gpu", "reset_gpu"),
    _r(120, "GSP error", "critical", "gpu", "reset_gpu"),
    _r(121, "C2C link error", "critical", "gpu", "reset_gpu"),
    _r(140, "unrecovered ECC error", "critical", "gpu", "reset_gpu"),
    _r(144, "NVLink SAW error", "warning", "gpu", "investigate"),
    _r(145, "NVLink RLW error", "warning", "gpu", "investigate"),
    _r(149, "NVLink NETIR error", "critical", "gpu", "reset_gpu"),
    _r(154, "GPU recovery action changed", "critical", "gpu", "reboot"),
)


@dataclass(frozen=True)
class XidPolicy:
    rules: Mapping[int, XidRule]
    # an application Xid pages (and its incident is critical) once this many fire within
    # this many seconds on one host; None: never on its own (bot/domain/xid_storm.py)
    storm_rate: tuple[int, float] | None = None

    def rule(self, xid: int) -> XidRule:
        """Unknown Xids are a warning to investigate, of unknown fault."""
        return self.rules.get(xid) or XidRule(xid, "Xid not in the policy table", "warning",
                                              Fault.UNKNOWN, XidStep.INVESTIGATE)

    def critical_gpu_xids(self) -> list[int]:
        return sorted(x for x, r in self.rules.items() if r.breaks_gpu)


DEFAULT_POLICY = XidPolicy({r.xid: r for r in DEFAULT_RULES})
_FIELDS = {"title", "severity", "fault", "step"}


def xid_policy_from_extra(extra: Mapping[str, Any]) -> XidPolicy:
    """``extra.xid_policy`` (``{xids: {79: {severity: critical, ...}}}``) over the
    defaults; a bad key or value is a ``ConfigError`` naming it."""
    section = extra.get("xid_policy") or {}
    if not isinstance(section, Mapping) or set(section) - {"xids", "storm"}:
        raise ConfigError("key 'extra.xid_policy': only 'xids' and 'storm' are allowed")
    rules = dict(DEFAULT_POLICY.rules)
    for key, entry in (section.get("xids") or {}).items():
        xid = _xid_key(key)
        rules[xid] = _entry(xid, entry, rules.get(xid))
    return XidPolicy(rules, _storm(section.get("storm")))


def _storm(raw: object) -> tuple[int, float] | None:
    """``storm: {count: 100, within_s: 60}``: the rate past which an application Xid pages."""
    if raw is None:
        return None
    where = "extra.xid_policy.storm"
    if not isinstance(raw, Mapping) or set(raw) != {"count", "within_s"}:
        raise ConfigError(f"key '{where}': a mapping of count and within_s")
    count, within = raw["count"], raw["within_s"]
    if not isinstance(count, int) or isinstance(count, bool) or count < 2:
        raise ConfigError(f"key '{where}.count': a whole number, at least 2")
    if not isinstance(within, int | float) or isinstance(within, bool) or within <= 0:
        raise ConfigError(f"key '{where}.within_s': seconds, more than 0")
    return count, float(within)


def _xid_key(key: object) -> int:
    text = str(key)
    if not text.isdigit() or not 0 < int(text) < 10000:
        raise ConfigError(f"key 'extra.xid_policy.xids.{text}': an Xid is a number 1-9999")
    return int(text)


def _entry(xid: int, entry: object, base: XidRule | None) -> XidRule:
    where = f"extra.xid_policy.xids.{xid}"
    if not isinstance(entry, Mapping) or set(entry) - _FIELDS:
        raise ConfigError(f"key '{where}': a mapping of {', '.join(sorted(_FIELDS))}")
    rule = base or XidRule(xid, f"Xid {xid}", "warning", Fault.UNKNOWN, XidStep.INVESTIGATE)
    try:
        if "severity" in entry and entry["severity"] not in SEVERITIES:
            raise ValueError(f"severity must be one of {', '.join(SEVERITIES)}")
        return replace(rule, title=str(entry.get("title", rule.title))[:120],
                       severity=str(entry.get("severity", rule.severity)),
                       fault=Fault(entry.get("fault", rule.fault)),
                       step=XidStep(entry.get("step", rule.step)))
    except ValueError as exc:
        raise ConfigError(f"key '{where}': {exc}") from None
