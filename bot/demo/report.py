"""What the demo prints at the end: the output's integrity, the audit timeline, timings."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import torch
from rich.console import Console
from rich.table import Table

from bot.extract.spec import load_spec
from bot.extract.store import TMP_SUFFIX
from storage.audit import AuditEntry


@dataclass(frozen=True)
class Integrity:
    expected: int
    files: int
    loadable: int
    leftover_tmp: int

    @property
    def ok(self) -> bool:
        return self.expected == self.files == self.loadable and self.leftover_tmp == 0


def check_output(spec_path: Path) -> Integrity:
    """Every sample has exactly one ``.pt`` that loads with ``weights_only=True``."""
    spec = load_spec(spec_path)
    with spec.dataset.open(encoding="utf-8") as handle:
        expected = sum(1 for line in handle if line.strip())
    files = list(spec.output_dir.glob("*.pt"))
    loadable = 0
    for path in files:
        try:
            torch.load(path, weights_only=True)
            loadable += 1
        except Exception:
            pass
    tmp = [p for p in spec.output_dir.iterdir() if p.name.endswith(TMP_SUFFIX)]
    return Integrity(expected, len(files), loadable, len(tmp))


def print_integrity(console: Console, integrity: Integrity) -> None:
    verdict = "[green]complete[/green]" if integrity.ok else "[red]INCOMPLETE[/red]"
    console.print(f"output {verdict}: {integrity.files}/{integrity.expected} sample files, "
                  f"{integrity.loadable} load with torch.load(weights_only=True), "
                  f"{integrity.leftover_tmp} temporary files left")


def _detail(entry: AuditEntry) -> str:
    d = entry.detail
    if entry.action == "transition":
        return f"{d.get('from')} → {d.get('to')}: {d.get('reason', '')}"[:110]
    text = d.get("summary") or d.get("reason") or d.get("kind") or ""
    return str(text)[:110]


def print_timeline(console: Console, entries: list[AuditEntry]) -> None:
    table = Table(title="audit timeline", show_lines=False)
    for col in ("time (UTC)", "actor", "action", "detail"):
        table.add_column(col, overflow="fold")
    for e in entries:
        when = datetime.fromtimestamp(e.ts, UTC).strftime("%H:%M:%S.%f")[:-3]
        table.add_row(when, e.actor, e.action, _detail(e))
    console.print(table)


def print_timings(console: Console, timings: list[tuple[str, float]]) -> None:
    table = Table(title="step timings")
    table.add_column("step")
    table.add_column("seconds", justify="right")
    for label, secs in timings:
        table.add_row(label, f"{secs:.2f}")
    table.add_row("[bold]total[/bold]", f"[bold]{sum(s for _, s in timings):.2f}[/bold]")
    console.print(table)
