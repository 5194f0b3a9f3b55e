"""The JSONL dataset and the batch plan.

Each line is ``{"id": ..., "text": ...}`` or ``{"id": ..., "input_ids": [...]}``. The
plan (which samples share a batch) depends only on the dataset and the spec, never on
what is already done: a resumed run recomputes a half-done batch with the same
neighbours and padding, so its tensors equal an uninterrupted run's bit for bit.
Memory stays bounded: one window of ``group_window`` batches is read at a time.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from bot.core.errors import UserError

ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")


@dataclass(frozen=True)
class Record:
    id: str
    text: str | None = None
    input_ids: tuple[int, ...] | None = None


@dataclass(frozen=True)
class Item:
    """A sample ready for the model (or why it cannot be)."""

    id: str
    tokens: tuple[int, ...]


Tokenize = Callable[[Record], tuple[int, ...]]


def parse_line(line: str, where: str) -> Record:
    """One JSONL line to a Record; ids become file names, so they are strictly checked."""
    try:
        obj = json.loads(line)
    except json.JSONDecodeError as exc:
        raise UserError(f"{where}: not valid JSON: {exc.msg}", 2) from None
    if not isinstance(obj, dict):
        raise UserError(f"{where}: each line must be a JSON object", 2)
    raw_id = obj.get("id")
    if (
        isinstance(raw_id, bool)
        or not isinstance(raw_id, str | int)
        or not ID_RE.match(str(raw_id))
    ):
        raise UserError(
            f"{where}: 'id' must be a string or integer of letters, digits, '.', '_', '-'", 2
        )
    text, ids = obj.get("text"), obj.get("input_ids")
    if isinstance(text, str) and ids is None:
        return Record(str(raw_id), text=text)
    if (
        isinstance(ids, list)
        and text is None
        and ids
        and all(isinstance(t, int) and not isinstance(t, bool) and t >= 0 for t in ids)
    ):
        return Record(str(raw_id), input_ids=tuple(ids))
    raise UserError(
        f"{where}: needs exactly one of 'text' (string) or 'input_ids' "
        "(non-empty list of non-negative integers)",
        2,
    )


def iter_records(path: Path) -> Iterator[Record]:
    """Stream the dataset; blank lines are skipped, anything else must parse."""
    try:
        handle = path.open(encoding="utf-8")
    except OSError as exc:
        raise UserError(f"{path}: cannot read dataset: {exc.strerror}", 2) from None
    with handle:
        for lineno, line in enumerate(handle, 1):
            if line.strip():
                yield parse_line(line, f"{path}:{lineno}")


def survey(path: Path, done: set[str] | frozenset[str] = frozenset()) -> tuple[int, int]:
    """(total samples, how many of them are in ``done``); rejects duplicate ids."""
    seen: set[str] = set()
    already = 0
    for record in iter_records(path):
        if record.id in seen:
            raise UserError(f"{path}: duplicate id {record.id!r}: ids name the output files", 2)
        seen.add(record.id)
        already += record.id in done
    if not seen:
        raise UserError(f"{path}: the dataset is empty", 2)
    return len(seen), already


def _windows(records: Iterator[Record], size: int) -> Iterator[list[Record]]:
    window: list[Record] = []
    for record in records:
        window.append(record)
        if len(window) == size:
            yield window
            window = []
    if window:
        yield window


def plan_batches(
    path: Path, tokenize: Tokenize, batch_size: int, group_window: int, skip: Callable[[str], bool]
) -> Iterator[list[Item]]:
    """Length-grouped batches in a fixed order; windows where ``skip`` holds for every
    sample are passed over without tokenizing (a resume fast-forwards cheaply)."""
    for window in _windows(iter_records(path), batch_size * group_window):
        if all(skip(r.id) for r in window):
            continue
        items = [Item(r.id, tokenize(r)) for r in window]
        order = sorted(range(len(items)), key=lambda i: (len(items[i].tokens), i))
        for start in range(0, len(order), batch_size):
            yield [items[i] for i in order[start : start + batch_size]]
