"""What the demo prints at the end: the output's integrity, the extraction's numbers (and
whether they add up), the audit timeline, timings."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from rich.console import Console
from rich.table import Table
from rich.text import Text

from bot.core import strings
from bot.extract.spec import load_spec
from bot.extract.store import TMP_SUFFIX
from bot.jobs.states import JobStatus
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
    import torch  # here, not at import: the demo's first lines come before torch loads

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
    verdict = "[green]complete[/green]" if integrity.ok else "[red]INCOMPLETE[/red]"  # ours
    console.print(f"output {verdict}: {integrity.files}/{integrity.expected} sample files, "
                  f"{integrity.loadable} load with torch.load(weights_only=True), "
                  f"{integrity.leftover_tmp} temporary files left")


@dataclass(frozen=True)
class Numbers:
    """The extraction's counts, from its record: before the crash, at resume, at the end."""

    job_id: str
    done_before: int  # its last progress report when the VM died
    resumed: int  # intact when the resumed run scanned the output
    written: int
    corrupt: int
    partial: int
    done: int
    total: int

    @property
    def agree(self) -> bool:
        """Every file reported before the crash is intact at resume unless found corrupt,
        and what the resumed run wrote completes the job."""
        return (self.done_before - self.corrupt == self.resumed
                and self.resumed + self.written == self.done == self.total)


def numbers(status: JobStatus, done_before: int) -> Numbers:
    return Numbers(status.job_id, done_before, status.resumed_from,
                   max(0, status.done - status.resumed_from),
                   status.repaired.get("corrupt_recomputed", 0),
                   status.repaired.get("partial_removed", 0), status.done, status.total)


def print_numbers(console: Console, n: Numbers) -> None:
    repairs = (f"{n.corrupt} corrupt file{'s' if n.corrupt != 1 else ''} recomputed, "
               f"{n.partial} partial file{'s' if n.partial != 1 else ''} removed")
    console.print(strings.DEMO_NUMBERS.format(
        job=n.job_id, done_before=n.done_before, total=n.total, resumed=n.resumed,
        repairs=repairs, written=n.written, done=n.done), markup=False)
    if not n.agree:
        console.print(Text(strings.DEMO_NUMBERS_DISAGREE, style="red"))


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
        table.add_row(when, Text(e.actor), Text(e.action), Text(_detail(e)))
    console.print(table)


def print_timings(console: Console, timings: list[tuple[str, float]], waited_s: float) -> None:
    """Each step's seconds and their total; a person's time to decide is shown apart."""
    table = Table(title=strings.DEMO_TIMINGS_TITLE)
    table.add_column("step")
    table.add_column("seconds", justify="right")
    for label, secs in timings:
        table.add_row(Text(label), f"{secs:.2f}")
    table.add_row(Text("total", style="bold"),
                  Text(f"{sum(s for _, s in timings):.2f}", style="bold"))
    console.print(table)
    if waited_s > 0:
        console.print(Text(strings.DEMO_WAITED.format(secs=waited_s), style="dim"))
