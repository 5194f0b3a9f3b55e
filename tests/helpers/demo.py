"""Run ``incident-bot demo`` as a person would (on a terminal, typing after a pause), and
read a transcript's numbers to check that they agree with each other.

``python -m tests.helpers.demo docs/demo-transcript.md`` writes the transcript kept in
``docs/`` (both ways: ``--yes``, and a person typing ``approve 1``).
"""

from __future__ import annotations

import os
import pty
import re
import select
import subprocess
import sys
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PROMPT = "type e.g. 'approve 1'"
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def demo_env(tmpdir: Path | None = None, columns: int = 160) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "REDIS_URL"}
    env.update(COLUMNS=str(columns), NO_COLOR="1", PYTHONPATH=str(ROOT))
    if tmpdir is not None:
        env["TMPDIR"] = str(tmpdir)
    return env


def run_yes(env: dict[str, str], timeout_s: float = 170) -> tuple[int, str]:
    proc = subprocess.run([sys.executable, "-m", "bot.cli", "demo", "--yes"], env=env,
                          capture_output=True, text=True, timeout=timeout_s, cwd=ROOT)
    return proc.returncode, proc.stdout + proc.stderr


def run_typed(env: dict[str, str], answer: str = "approve 1", think_s: float = 2.0,
              timeout_s: float = 170) -> tuple[int, str]:
    """The demo on a terminal (a pty): wait for the prompt, think ``think_s``, type."""
    pid, fd = pty.fork()
    if pid == 0:  # the child: the demo, as a person starts it
        os.chdir(ROOT)
        os.execvpe(sys.executable, [sys.executable, "-m", "bot.cli", "demo"], env)
    out, sent = b"", False
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 0.2)
        if ready:
            try:
                chunk = os.read(fd, 65536)
            except OSError:  # EIO: the child closed the terminal
                break
            if not chunk:
                break
            out += chunk
        if not sent and PROMPT.encode() in out:
            time.sleep(think_s)
            os.write(fd, (answer + "\n").encode())
            sent = True
    else:
        os.kill(pid, 9)
    _, status = os.waitpid(pid, 0)
    os.close(fd)
    text = ANSI.sub("", out.decode(errors="replace")).replace("\r\n", "\n")
    return os.waitstatus_to_exitcode(status), text


@dataclass
class Read:
    """Each number the transcript shows, where it shows it."""

    ago: dict[str, str]
    crash: tuple[int, int, float]  # done, total, percent in the crash header
    written_before: int  # the set-up line "N/T samples written before the VM died"
    queued: tuple[int, int]  # the resume action's "queued, N/T done"
    resumed_at: int
    final: dict[str, int]
    output_files: int
    timings: list[tuple[str, float]]
    total: float
    waited: float | None
    approved_at: float | None
    resumed_state_at: float | None


def flat(text: str) -> str:
    """Panels and tables wrap; read the words without their frames, on one line."""
    return " ".join(re.sub(r"[│╭╮╰╯─┃┏┓┗┛━┡┩╇┳┻└┘┴┬├┤┼]", " ", text).split())


def _one(pattern: str, text: str) -> re.Match[str]:
    found = re.search(pattern, text)
    if found is None:
        raise AssertionError(f"not in the transcript: {pattern}")
    return found


def _clock(line_pattern: str, text: str) -> float | None:
    found = re.search(rf"│ (\d\d):(\d\d):(\d\d\.\d{{3}}) │[^\n]*?{line_pattern}", text)
    if found is None:
        return None
    h, m, s = found.groups()
    return int(h) * 3600 + int(m) * 60 + float(s)


def read(text: str) -> Read:
    flat_text = flat(text)
    crash = _one(r"VM \S+ restarted (.+?) ago; extraction ex-[0-9a-f]{12} was (\d+)/(\d+) "
                 r"done \(([\d.]+)%\)", flat_text)
    final = _one(r"completed (\d+)/(\d+) in .*? (\d+) written, (\d+) skipped, (\d+) repaired "
                 r"\((\d+) partial files? removed, (\d+) corrupt files? recomputed\)", flat_text)
    rows = re.findall(r"^│ (.+?)\s+│\s+([\d.]+) │$", text, re.M)
    timings = [(label.strip(), float(secs)) for label, secs in rows if label.strip() != "total"]
    total = next(float(secs) for label, secs in rows if label.strip() == "total")
    waited = re.search(r"waiting for your decision: ([\d.]+) s \(not counted\)", flat_text)
    return Read(
        ago={"set-up": _one(r"booted (.+?) ago \(seed scenario\)", flat_text)[1],
             "crash header": crash[1],
             "alert": _one(r"\S+: booted (.+?) ago\. Diagnosing", flat_text)[1],
             "diagnosis": _one(r"Booted (.+?) ago;", flat_text)[1]},
        crash=(int(crash[2]), int(crash[3]), float(crash[4])),
        written_before=int(_one(r"(\d+)/\d+ samples written before the VM died", flat_text)[1]),
        queued=(int(_one(r"queued, (\d+)/(\d+) done", flat_text)[1]),
                int(_one(r"queued, (\d+)/(\d+) done", flat_text)[2])),
        resumed_at=int(_one(r"resumed at (\d+)", flat_text)[1]),
        final=dict(zip(("done", "total", "written", "skipped", "repaired", "partial",
                        "corrupt"), (int(g) for g in final.groups()), strict=True)),
        output_files=int(_one(r"output complete: (\d+)/\d+ sample files", flat_text)[1]),
        timings=timings, total=total, waited=float(waited[1]) if waited else None,
        approved_at=_clock(r"│ approval\.approved", text),
        resumed_state_at=_clock(r"│ transition\s+│ verified → resumed", text),
    )


def disagreements(text: str) -> list[str]:
    """Every way the transcript contradicts itself (empty: it reads true)."""
    r, out = read(text), []
    if len(set(r.ago.values())) != 1:
        out.append(f"boot time differs: {r.ago}")
    done, total, pct = r.crash
    if not done == r.written_before == r.queued[0] or total != r.queued[1]:
        out.append(f"done before the crash: header {r.crash}, set-up {r.written_before}, "
                   f"resume {r.queued}")
    if abs(pct - 100 * done / total) > 0.05:
        out.append(f"{pct}% is not {done}/{total}")
    f = r.final
    if done - f["corrupt"] != r.resumed_at:
        out.append(f"{done} done - {f['corrupt']} corrupt != resumed at {r.resumed_at}")
    if r.resumed_at + f["written"] != f["done"] or not f["done"] == f["total"] == total:
        out.append(f"resumed at {r.resumed_at} + {f['written']} written != {f['done']}/{total}")
    if f["repaired"] != f["partial"] + f["corrupt"] or r.output_files != total:
        out.append(f"repairs or output do not add up: {f}, {r.output_files} files")
    if abs(sum(s for _, s in r.timings) - r.total) > 0.01 * len(r.timings):
        out.append(f"step timings {r.timings} do not sum to the total {r.total}")
    approval = next(s for label, s in r.timings if label.startswith("approval"))
    if r.approved_at is None or r.resumed_state_at is None:
        out.append("the audit timeline lacks approval.approved or verified → resumed")
    elif not -0.6 <= approval - (r.resumed_state_at - r.approved_at) <= 0.6:
        out.append(f"approval step {approval} s is not the audit's "
                   f"{r.resumed_state_at - r.approved_at:.2f} s from approval to resumed")
    return out


def write_transcript(path: Path) -> None:
    """Run the demo both ways and keep what it printed, with the date and the machine."""
    env = demo_env()
    yes_rc, yes = run_yes(env)
    typed_rc, typed = run_typed(env, think_s=3.0)
    assert yes_rc == 0 and typed_rc == 0, (yes[-2000:], typed[-2000:])
    for text in (yes, typed):
        assert not disagreements(text), disagreements(text)
    when = datetime.now().strftime("%Y-%m-%d")
    path.write_text(
        "# The demo's transcript\n\n"
        f"What `incident-bot demo` printed on {when} (2 cores, shared; `COLUMNS=160`,\n"
        "`NO_COLOR=1`): first with `--yes`, then on a terminal with a person who read the\n"
        "message for about 3 s and typed `approve 1`. Timings differ from run to run; the\n"
        "numbers must agree with each other, and `tests/unit/test_demo_transcript.py` checks\n"
        "that they do (the boot time, done/total, resumed-at, written/skipped/repaired, the\n"
        "step timings against their total and against the audit timeline). Written by\n"
        "`python -m tests.helpers.demo docs/demo-transcript.md`.\n\n"
        "## `incident-bot demo --yes`\n\n```text\n" + yes.rstrip() + "\n```\n\n"
        "## `incident-bot demo`, a person typing\n\n```text\n" + typed.rstrip() + "\n```\n")


if __name__ == "__main__":
    write_transcript(Path(sys.argv[1]))
