"""The incident in words a person reads in five seconds: headline, state, ask, evidence.

Pure functions over a ``Diagnosis`` and the incident record; ``bot.chat.render`` calls
them for the parent message (headline, state line, action sentence, buttons), the thread
(one compact evidence table) and the notification text (host, cause, ask). Quantities go
through ``bot.core.fmt``; host text is escaped; no repr or JSON ever reaches the chat.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from bot.chat import cleanup_view
from bot.chat.base import Section
from bot.chat.text import clip, code_safe, escape
from bot.core import fmt, strings
from bot.domain.findings import Diagnosis, Finding, ProposedAction
from bot.domain.validate import USERGROUP_RE

BOOT_WINDOW_S = 300.0  # a holder started this soon after boot was "auto-started at boot"
GB_RE = re.compile(r"(\d) GB\b")  # playbook text says GB for binary gigabytes
SEVERITY_RANK = {"critical": 0, "warning": 1, "info": 2}
STATE_ICON = {
    "open": ":new:", "diagnosing": ":mag:", "diagnosis_failed": ":warning:",
    "no_action": ":white_circle:", "awaiting_approval": ":raising_hand:",
    "approved": ":thumbsup:", "denied": ":no_entry_sign:", "expired": ":hourglass:",
    "remediating": ":gear:", "verified": ":white_check_mark:", "action_failed": ":x:",
    "failed": ":x:", "resumed": ":arrow_forward:", "snoozed": ":zzz:",
    "resolved": ":heavy_check_mark:",
}


class IncidentLike(Protocol):
    """What the summary and the renderer read from an incident (a stored Incident fits)."""

    @property
    def id(self) -> str: ...
    @property
    def host(self) -> str: ...
    @property
    def kind(self) -> str: ...
    @property
    def severity(self) -> str: ...
    @property
    def state(self) -> str: ...
    @property
    def first_seen(self) -> float: ...


def _val(value: Any) -> str:
    return str(getattr(value, "value", value))


def primary_finding(diagnosis: Diagnosis) -> Finding | None:
    """The finding the headline is about: the most severe, first on ties."""
    if not diagnosis.findings:
        return None
    return min(diagnosis.findings, key=lambda f: SEVERITY_RANK.get(_val(f.severity), 3))


def _gpus(finding: Finding | None) -> list[Mapping[str, Any]]:
    gpus = finding.evidence.get("gpus") if finding else None
    return [g for g in gpus if isinstance(g, Mapping)] if isinstance(gpus, list) else []


def _number(value: Any) -> float | None:
    ok = isinstance(value, int | float) and not isinstance(value, bool)
    return float(value) if ok else None


def gpu_amount(gpus: Sequence[Mapping[str, Any]]) -> str:
    """``8 GPUs × 75.8 GiB`` when all hold the same, else ``3 GPUs, 70.1–75.8 GiB``."""
    n = len(gpus)
    label = f"{n} GPU{'' if n == 1 else 's'}"
    used = sorted({fmt.gib(_number(g.get("memory_used_mib"))) for g in gpus})
    if len(used) == 1:
        return f"{label} × {used[0]}"
    mibs = [m for m in (_number(g.get("memory_used_mib")) for g in gpus) if m is not None]
    low, high = (fmt.gib(min(mibs)), fmt.gib(max(mibs))) if mibs else ("?", "?")
    return f"{label}, {low.removesuffix(' GiB')}–{high}"


def total_held(gpus: Sequence[Mapping[str, Any]]) -> str:
    return fmt.gib(sum(_number(g.get("memory_used_mib")) or 0.0 for g in gpus))


def _util(gpus: Sequence[Mapping[str, Any]]) -> str:
    values = [_number(g.get("utilization_pct", g.get("max_util_pct"))) for g in gpus]
    known = [v for v in values if v is not None]
    if not known:
        return "unknown utilisation"
    lo, hi = min(known), max(known)
    return f"{hi:.0f}%" if lo == hi else f"{lo:.0f}–{hi:.0f}%"


def holder_name(finding: Finding) -> str:
    """Who holds the GPUs, as people name it: the unit that restarts it, else the PID."""
    restarter = finding.evidence.get("restarter")
    if isinstance(restarter, Mapping) and restarter.get("name"):
        return str(restarter["name"])
    holders = finding.evidence.get("holders")
    if isinstance(holders, list) and holders and isinstance(holders[0], Mapping):
        first = holders[0]
        if first.get("unit"):
            return str(first["unit"])
        return f"PID {first.get('pid', '?')} ({first.get('kind') or 'process'})"
    return "an unknown process"


def started_clause(finding: Finding) -> str:
    holders = finding.evidence.get("holders")
    if not (isinstance(holders, list) and holders and isinstance(holders[0], Mapping)):
        return ""
    after = _number(holders[0].get("started_after_boot_s"))
    if after is None:
        return ""
    if after <= BOOT_WINDOW_S:
        return strings.MSG_STARTED_AT_BOOT
    return strings.MSG_STARTED_AFTER_BOOT.format(after=fmt.duration(after))


def headline(incident: IncidentLike, diagnosis: Diagnosis, now: float) -> str:
    """What, where, the impact: ``gpu-01: 8 GPUs × 75.8 GiB held at 0% for 4 min by …``."""
    finding = primary_finding(diagnosis)
    host = escape(incident.host)
    gpus = _gpus(finding)
    if finding is None:
        return strings.MSG_HEADLINE_GENERIC.format(host=host, title=strings.FLOW_NO_FINDINGS)
    if finding.code != "gpu.idle_vram_held" or not gpus:
        return strings.MSG_HEADLINE_GENERIC.format(host=host, title=plain_title(finding))
    since = incident.first_seen
    idle_for = strings.MSG_IDLE_FOR.format(duration=fmt.age(now, since)) if since > 0 else ""
    return strings.MSG_HEADLINE_IDLE.format(
        host=host, gpus=gpu_amount(gpus), util=_util(gpus), idle_for=idle_for,
        who=escape(holder_name(finding)), started=started_clause(finding))


def plain_title(finding: Finding) -> str:
    """A finding's title in chat units (GiB), escaped and kept to one readable line."""
    return escape(clip(GB_RE.sub(r"\1 GiB", finding.title.splitlines()[0]), 200))


def state_line(incident: IncidentLike, now: float) -> str:
    """``:raising_hand: Awaiting approval · incident INC-7 · opened 4 min ago``."""
    state = _val(incident.state)
    since = incident.first_seen or now
    return strings.MSG_STATE_LINE.format(
        icon=STATE_ICON.get(state, ":white_circle:"), label=state.replace("_", " ").capitalize(),
        id=escape(incident.id), age=fmt.age(now, since))


def action_phrase(action: ProposedAction, diagnosis: Diagnosis | None = None) -> str:
    """The catalog action as a plain verb phrase (never ``kind key=value``)."""
    if action.kind == "disk.cleanup" and diagnosis is not None and cleanup_view.items(diagnosis):
        return cleanup_view.phrase(action, diagnosis)
    p = {k: escape(v) for k, v in action.params.items()}
    templates = {
        "systemd.stop_disable": strings.MSG_ACTION_STOP_DISABLE,
        "systemd.mask": strings.MSG_ACTION_MASK,
        "process.terminate": strings.MSG_ACTION_TERMINATE,
        "extraction.resume": strings.MSG_ACTION_RESUME,
        "journal.vacuum": strings.MSG_ACTION_JOURNAL,
        "disk.journal_vacuum": strings.MSG_ACTION_JOURNAL,  # the catalog's name for it
        "slurm.drain": strings.MSG_ACTION_SLURM_DRAIN,
        "slurm.resume": strings.MSG_ACTION_SLURM_RESUME,
        "slurm.requeue": strings.MSG_ACTION_SLURM_REQUEUE,
        "slurm.cancel": strings.MSG_ACTION_SLURM_CANCEL,
        "host.reboot": strings.MSG_ACTION_REBOOT,
    }
    template = templates.get(action.kind)
    try:
        return template.format(**p) if template else _generic(action, p)
    except KeyError:
        return _generic(action, p)


def _generic(action: ProposedAction, p: Mapping[str, str]) -> str:
    params = ", ".join(f"{k} {v}" for k, v in sorted(p.items())) or "the host"
    return strings.MSG_ACTION_GENERIC.format(kind=escape(action.kind), params=params)


def action_sentence(action: ProposedAction, diagnosis: Diagnosis) -> str:
    """``*Proposed:* stop X and keep it from starting at boot (frees 606.2 GiB). *Risk:* …``."""
    phrase = action_phrase(action, diagnosis)
    finding = primary_finding(diagnosis)
    gpus = _gpus(finding)
    if gpus and action.kind in ("systemd.stop_disable", "systemd.mask", "process.terminate"):
        phrase += f" ({strings.MSG_FREES.format(mem=total_held(gpus))})"
    if action.risk:
        risk = escape(action.risk).rstrip(".")
        return strings.MSG_ACTION.format(sentence=_capital(phrase), risk=risk)
    return strings.MSG_ACTION_NO_RISK.format(sentence=_capital(phrase))


def _capital(text: str) -> str:
    return text[:1].upper() + text[1:]


def oncall_mention(group: str | None) -> str:
    """A Slack user-group mention (``<!subteam^S0ONCALL>``) for ids that look like one."""
    if group and USERGROUP_RE.match(group):
        return f"<!subteam^{group}> "
    return ""


def notification_text(incident: IncidentLike, diagnosis: Diagnosis,
                      oncall: str | None = None) -> str:
    """What a phone shows: host, cause and the ask; critical incidents @mention on-call."""
    mention = oncall_mention(oncall) if _val(incident.severity) == "critical" else ""
    finding = primary_finding(diagnosis)
    gpus = _gpus(finding)
    if finding is not None and finding.code == "gpu.idle_vram_held" and gpus:
        cause = strings.MSG_CAUSE_IDLE.format(
            who=escape(holder_name(finding)), gpus=gpu_amount(gpus), util=_util(gpus))
    else:
        cause = plain_title(finding) if finding else strings.FLOW_NO_FINDINGS
    state = _val(incident.state)
    if diagnosis.actions and state == "awaiting_approval":
        first = action_phrase(diagnosis.actions[0], diagnosis)
        ask = strings.MSG_ASK_APPROVE.format(sentence=first)
    else:
        ask = strings.MSG_ASK_STATE.format(state=state.replace("_", " "))
    return strings.MSG_NOTIFY.format(mention=mention, host=escape(incident.host),
                                     cause=cause, ask=ask)


def evidence_table(diagnosis: Diagnosis) -> Section | None:
    """The thread's one compact table: per GPU memory, utilisation, PID and unit."""
    finding = primary_finding(diagnosis)
    gpus = _gpus(finding)
    if not gpus:
        return None
    samples = int(_number(gpus[0].get("samples")) or 1)
    rows = [("GPU", "MEMORY", "UTIL", "PID", "UNIT")]
    rows += [_gpu_row(g) for g in gpus]
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r[:4], widths, strict=True)) + "  " + r[4]
             for r in rows]
    title = strings.MSG_EVIDENCE_TITLE.format(
        n=len(gpus), s="" if len(gpus) == 1 else "s", samples=samples,
        ss="" if samples == 1 else "s")
    return Section(text=title, code=code_safe("\n".join(line.rstrip() for line in lines)))


def _gpu_row(g: Mapping[str, Any]) -> tuple[str, str, str, str, str]:
    used, total = _number(g.get("memory_used_mib")), _number(g.get("memory_total_mib"))
    mem = f"{fmt.gib(used).removesuffix(' GiB')} / {fmt.gib(total)}"
    util = _number(g.get("utilization_pct", g.get("max_util_pct")))
    holders = g.get("holder")
    first = holders[0] if isinstance(holders, list) and holders else holders
    first = first if isinstance(first, Mapping) else {}
    pid, unit = first.get("pid"), first.get("unit") or first.get("name")
    return (str(g.get("index", "?")), mem, "?" if util is None else f"{util:.0f}%",
            "-" if pid is None else str(pid), clip(str(unit or "-"), 48))
