"""A postmortem as Markdown a person pastes into a retrospective doc, or as JSON.

Pure. Times are UTC with seconds (a timeline where everything happened in one minute
needs them); durations go through ``bot/core/fmt.py``.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from datetime import UTC, datetime
from typing import Any

from bot.core import fmt
from bot.core import strings as S
from bot.digest.postmortem import Postmortem
from bot.digest.postmortem_evidence import HostChange


def utc(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%d %H:%M:%S")


def _cell(text: str) -> str:
    """Table cells: one line, pipes escaped."""
    return " ".join(text.split()).replace("|", "\\|")


def _with_who(seconds: float | None, who: str) -> str:
    if seconds is None:
        return S.PM_NOT_YET
    return S.PM_BY.format(value=fmt.duration(seconds), who=who) if who else fmt.duration(seconds)


def _facts(pm: Postmortem) -> list[str]:
    gpu = S.PM_NOT_YET if pm.gpu_hours_lost is None else S.PM_GPU_HOURS_VALUE.format(
        hours=pm.gpu_hours_lost, gpus=pm.gpus, span=fmt.duration(pm.ttm_s or pm.ttr_s))
    rows = [(S.PM_HOST, pm.host), (S.PM_KIND, pm.kind), (S.PM_SEVERITY, pm.severity),
            (S.PM_STATE, pm.state), (S.PM_DETECTED, utc(pm.detected_at) + " UTC"),
            (S.PM_RESOLVED, utc(pm.resolved_at) + " UTC" if pm.resolved_at else S.PM_NOT_YET),
            (S.PM_TTA, _with_who(pm.tta_s, pm.acked_by)), (S.PM_TTM, _with_who(pm.ttm_s, "")),
            (S.PM_TTR, _with_who(pm.ttr_s, "")), (S.PM_GPU_HOURS, gpu),
            (S.PM_PEOPLE, ", ".join(pm.people) or "-")]
    if pm.permalink:
        rows.append((S.PM_SLACK, pm.permalink))
    return [S.PM_FACTS_HEAD, *(S.PM_FACT.format(label=k, value=_cell(v)) for k, v in rows)]


def _timeline(pm: Postmortem) -> list[str]:
    return [S.PM_TIMELINE, "", S.PM_TIMELINE_HEAD, *(
        S.PM_TIMELINE_ROW.format(at=utc(e.at), since=fmt.duration(e.since_s), step=e.step.value,
                                 who=_cell(e.who) or "-", what=_cell(e.what) or "-")
        for e in pm.events)]


def _change(c: HostChange) -> list[str]:
    params = " ".join(f"{k}={v}" for k, v in sorted(c.params.items()))
    lines = [S.PM_CHANGE.format(kind=c.kind, params=params, outcome=c.outcome,
                                approver=c.approver)]
    lines += [S.PM_CHANGE_CMD.format(command=r.command, exit="timed out" if r.timed_out
                                     else f"exit {r.exit_status}") for r in c.commands]
    if not c.revert:
        return [*lines, S.PM_NO_REVERT]
    lines.append(S.PM_REVERT.format(line=c.revert))
    if c.revert_commands:
        lines.append(S.PM_REVERT_CMDS.format(
            commands=", ".join(f"`{x}`" for x in c.revert_commands)))
    return lines


def _evidence(pm: Postmortem) -> list[str]:
    ev = pm.evidence
    lines = [S.PM_EVIDENCE, ""]
    if ev.evidence_hash:
        lines.append(S.PM_EVIDENCE_HASH.format(hash=ev.evidence_hash))
    lines += [S.PM_FINDING.format(severity=f.severity, code=f.code, title=f.title)
              for f in ev.findings]
    failed = S.PM_PROBES_FAILED.format(names=", ".join(ev.probes_failed)) if ev.probes_failed \
        else ""
    lines.append(S.PM_PROBES.format(n=ev.probes_run, failed=failed))
    lines += [S.PM_VERIFIED.format(text=v) for v in ev.verification]
    return lines


def to_markdown(pm: Postmortem) -> str:
    changes = [line for c in pm.changes for line in _change(c)] or [S.PM_CHANGES_NONE]
    parts = [S.PM_TITLE.format(id=pm.incident_id, summary=pm.summary or pm.kind), "",
             *_facts(pm), "", *_timeline(pm), "", S.PM_CHANGES, "", *changes, "",
             *_evidence(pm)]
    return "\n".join(parts) + "\n"


def to_json_dict(pm: Postmortem) -> dict[str, Any]:
    """The dataclass tree as plain JSON values (steps as their strings, times as epochs)."""
    data = asdict(pm)
    for event in data["events"]:
        event["step"] = str(event["step"])
        event["at_utc"] = utc(event["at"]).replace(" ", "T") + "Z"
    return data


def to_json(pm: Postmortem) -> str:
    return json.dumps(to_json_dict(pm), indent=2, sort_keys=True, ensure_ascii=False)


def _in(seconds: float | None, who: str = "") -> str:
    if seconds is None:
        return S.PM_NOT_YET
    text = S.PM_IN.format(d=fmt.duration(seconds))
    return f"{text} ({who})" if who else text


def to_thread_text(pm: Postmortem) -> str:
    """The short version posted in the incident's thread when it resolves."""
    hours = "?" if pm.gpu_hours_lost is None else f"{pm.gpu_hours_lost:.2f}"
    lines = [S.PM_THREAD.format(id=pm.incident_id, tta=_in(pm.tta_s, pm.acked_by),
                                ttm=_in(pm.ttm_s), ttr=_in(pm.ttr_s), gpu_hours=hours,
                                gpus=pm.gpus)]
    lines += [S.PM_THREAD_CHANGE.format(
        host=pm.host, kind=c.kind, params=" ".join(f"{k}={v}" for k, v in sorted(c.params.items())),
        outcome=c.outcome, revert=c.revert or "-") for c in pm.changes]
    lines.append(S.PM_THREAD_MORE.format(id=pm.incident_id))
    return "\n".join(lines)
