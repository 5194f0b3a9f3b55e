"""A disk cleanup in chat words: the thread's preview table, the sentence for each
cleanup proposal, and one compact row of per-part buttons (pure).

Everything is read from the stored diagnosis: the info finding
``disk.cleanup_candidates`` holds the chosen items (size, age, owner, category, files),
so a proposal's sentence can say how many items and how much it frees, and the table
renders the same at every retry. Sizes are GiB (``bot.core.fmt``); host text is escaped.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from bot.chat.base import Button, ButtonStyle, Section
from bot.chat.text import clip, code_safe, escape
from bot.core import fmt, strings
from bot.domain.findings import Diagnosis, ProposedAction
from bot.remediation.actions.disk_cleanup import DiskCleanup

CANDIDATES_CODE = "disk.cleanup_candidates"
SEP = "|"
MAX_ROWS = 12
PATH_COLUMN = 64
CATEGORY = {"hf_cache": "HF cache", "torch_hub": "torch hub", "pip_cache": "pip cache",
            "checkpoint": "checkpoint", "core_dump": "core dump", "rotated_log": "rotated log"}


def _evidence(diagnosis: Diagnosis) -> Mapping[str, Any]:
    for f in diagnosis.findings:
        if f.code == CANDIDATES_CODE:
            return f.evidence
    return {}


def items(diagnosis: Diagnosis) -> list[Mapping[str, Any]]:
    raw = _evidence(diagnosis).get("items")
    return [i for i in raw if isinstance(i, Mapping)] if isinstance(raw, list) else []


def gib(n_bytes: Any) -> str:
    return fmt.gib(float(n_bytes) / 2**20 if isinstance(n_bytes, int | float) else None)


def is_part(action: ProposedAction) -> bool:
    return DiskCleanup.is_part(action)


def covered(action: ProposedAction, diagnosis: Diagnosis) -> list[Mapping[str, Any]]:
    """The stored items whose files all go with ``action``."""
    paths = set(action.params.get("paths", "").split(SEP))
    return [i for i in items(diagnosis) if set(i.get("paths") or ()) <= paths]


def part_name(group: Sequence[Mapping[str, Any]]) -> str:
    """``HF cache`` for a category; with the file's own name for a single item."""
    cats = sorted({str(i.get("category")) for i in group})
    if len(cats) != 1:
        return strings.MSG_CLEANUP_MIXED
    name = CATEGORY.get(cats[0], "?")
    if len(group) == 1:
        name += " " + clip(item_name(group[0]), 28)
    return name


def item_name(item: Mapping[str, Any]) -> str:
    """What a person recognises an item by: a cache's model (``models--org--name``, not
    its blob's hash), else the file's or entry's own name."""
    parts = str(item.get("label", "?")).split("/")
    model = next((p for p in parts if p.startswith(("models--", "datasets--"))), None)
    return model.split("--", 1)[1] if model else parts[-1]


def phrase(action: ProposedAction, diagnosis: Diagnosis) -> str:
    """``delete 2 items (1 HF cache, 1 checkpoint), freeing 333.0 GiB of the 321.0 GiB
    needed; keeps the newest 2 checkpoints of each run (llama-sft: checkpoint-4500, …)``;
    a plan that cannot reach the need says by how much it falls short."""
    group = covered(action, diagnosis)
    total = sum(int(i.get("size") or 0) for i in group)
    size = gib(total)
    if is_part(action):
        return strings.MSG_ACTION_CLEANUP_PART.format(what=escape(part_name(group)),
                                                      n=len(group), s=_s(len(group)), size=size)
    ev = _evidence(diagnosis)
    need = ev.get("need_bytes")
    said = strings.MSG_ACTION_CLEANUP.format(n=len(group), s=_s(len(group)), what=kinds(group),
                                             size=size, need=gib(need))
    if isinstance(need, int) and total < need:
        said += strings.MSG_CLEANUP_SHORT.format(gap=gib(need - total))
    return said + keeps(ev)


def kinds(group: Sequence[Mapping[str, Any]]) -> str:
    """``1 HF cache, 3 checkpoints``: what the items are, largest category first."""
    sizes: dict[str, list[int]] = {}
    for i in group:
        sizes.setdefault(str(i.get("category")), []).append(int(i.get("size") or 0))
    ranked = sorted(sizes.items(), key=lambda kv: -sum(kv[1]))
    return ", ".join(f"{len(v)} {CATEGORY.get(k, '?')}{_s(len(v))}" for k, v in ranked)


def keeps(ev: Mapping[str, Any]) -> str:
    """``; keeps the newest 2 checkpoints of each run (llama-sft: checkpoint-4500, …)``."""
    kept = ev.get("kept")
    if not isinstance(kept, Mapping) or not kept:
        return ""
    runs = [f"{escape(str(run).rsplit('/', 1)[-1])}: "
            + ", ".join(escape(str(e).rsplit("/", 1)[-1]) for e in entries)
            for run, entries in list(kept.items())[:3] if isinstance(entries, list)]
    return strings.MSG_CLEANUP_KEEPS.format(k=ev.get("keep_per_run", "?"), runs="; ".join(runs))


def table(diagnosis: Diagnosis) -> Section | None:
    """The thread's preview: the chosen items ranked by size, the total and what is needed."""
    shown = items(diagnosis)
    if not shown:
        return None
    ev = _evidence(diagnosis)
    rows = [("SIZE", "AGE", "OWNER", "CATEGORY", "PATH")]
    rows += [_row(i) for i in shown[:MAX_ROWS]]
    widths = [max(len(r[c]) for r in rows) for c in range(4)]
    lines = ["  ".join(c.rjust(w) if n == 0 else c.ljust(w)
                       for n, (c, w) in enumerate(zip(r[:4], widths, strict=True))) + "  " + r[4]
             for r in rows]
    if len(shown) > MAX_ROWS:
        rest = sum(int(i.get("size") or 0) for i in shown[MAX_ROWS:])
        more = len(shown) - MAX_ROWS
        lines.append(strings.MSG_CLEANUP_MORE.format(n=more, s=_s(more), size=gib(rest)))
    title = strings.MSG_CLEANUP_TITLE.format(n=len(shown), s=_s(len(shown)),
                                             total=gib(ev.get("total_bytes")),
                                             need=gib(ev.get("need_bytes")))
    return Section(text=title, code=code_safe("\n".join(line.rstrip() for line in lines)))


def _row(item: Mapping[str, Any]) -> tuple[str, str, str, str, str]:
    label = str(item.get("label", "?"))
    if len(label) > PATH_COLUMN:  # the tail names the file; keep it
        label = "…" + label[-(PATH_COLUMN - 1):]
    age = item.get("age_s")
    return (gib(item.get("size")), fmt.duration(age if isinstance(age, int | float) else None),
            clip(str(item.get("owner") or "?"), 12), CATEGORY.get(str(item.get("category")), "?"),
            label)


def parts_section(parts: Sequence[tuple[ProposedAction, str, str | None]],
                  diagnosis: Diagnosis, decided: Sequence[str]) -> Section:
    """One line and one row of Approve buttons, one per part (``(action, approval id,
    confirm text)``); no per-part Deny: the whole proposal's Deny declines them all."""
    buttons = tuple(
        Button(strings.MSG_CLEANUP_PART_BUTTON.format(
            what=part_name(covered(a, diagnosis)),
            size=gib(sum(int(i.get("size") or 0) for i in covered(a, diagnosis)))),
            "approve", approval_id, ButtonStyle.DEFAULT, confirm)
        for a, approval_id, confirm in parts)
    lines = ([strings.MSG_CLEANUP_PARTS] if buttons else []) + list(decided)
    return Section(text="\n".join(lines), buttons=buttons)


def _s(n: int) -> str:
    """Plural agreement: ``1 item``, ``3 items``."""
    return "" if n == 1 else "s"
