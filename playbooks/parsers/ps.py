"""``ps`` output: ``PS_FIELDS`` rows (``args`` last: it has spaces), then after a ``---``
line ``PS_CGROUP_FIELDS`` rows (``cgroup`` last too: on a hostile host it may hold spaces).

Also names the kind of server a command line looks like (vLLM, SGLang, ...): a
process list is text from the host, so this is a label for people, never a decision
to act by itself.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass

from bot.domain.host_state import ProcState
from playbooks.parsers.common import first_line, integer, lines
from playbooks.parsers.systemd import unit_from_cgroup

PS_FIELDS = "pid=,ppid=,etimes=,user:32=,args="
PS_CGROUP_FIELDS = "pid=,cgroup="
SECTION = "---"

# (label, pattern on the command line); first match wins.
SERVER_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("vLLM", re.compile(r"\bvllm\b", re.I)),
    ("SGLang", re.compile(r"\bsglang\b", re.I)),
    ("TGI", re.compile(r"text-generation-(?:inference|launcher|server)", re.I)),
    ("Triton", re.compile(r"\btritonserver\b", re.I)),
    ("Ollama", re.compile(r"\bollama\b", re.I)),
    ("TensorRT-LLM", re.compile(r"\btrtllm-serve\b|tensorrt_llm", re.I)),
    ("torch", re.compile(r"\btorchrun\b|torch\.distributed|\btorch\b", re.I)),
)
_NOTABLE_FLAGS = ("--gpu-memory-utilization", "--mem-fraction-static", "--tensor-parallel-size",
                  "--tp", "--model", "--model-path")


@dataclass(frozen=True)
class Proc:
    pid: int
    ppid: int
    elapsed_s: int | None
    user: str
    cgroup: str
    args: str


def _row(line: str, cgroups: dict[int, str]) -> Proc | None:
    parts = line.split(None, 4)
    if len(parts) < 5:
        return None
    pid, ppid, elapsed = integer(parts[0]), integer(parts[1]), integer(parts[2])
    if pid is None or ppid is None or pid <= 0 or ppid < 0 or not parts[0].isdigit():
        return None
    return Proc(pid=pid, ppid=ppid, elapsed_s=elapsed, user=parts[3],
                cgroup=cgroups.get(pid, ""), args=parts[4].strip())


def _pid_cgroups(text: str) -> dict[int, str]:
    """``ps -eo pid=,cgroup=`` -> pid -> cgroup, empty where ps printed none."""
    out: dict[int, str] = {}
    for line in lines(text):
        pid, _, cgroup = line.strip().partition(" ")
        if pid.isascii() and pid.isdigit():  # "²".isdigit() is True, int("²") raises
            out[int(pid)] = cgroup.strip()
    return out


def parse_cgroups(text: str) -> dict[int, str]:
    """``ps -eo pid=,cgroup=`` -> pid -> cgroup (the rest of the line, spaces and all)."""
    return {p: c for p, c in _pid_cgroups(text).items() if c}


def cgroup_units(text: str) -> dict[int, str | None]:
    """``ps -eo pid=,cgroup=`` -> pid -> the systemd unit its cgroup names (None: none).
    The one reading of that output; remediation's re-probes use it too."""
    return {pid: unit_from_cgroup(c) if c else None for pid, c in _pid_cgroups(text).items()}


def parse_process(pid: int, text: str) -> ProcState:
    """``ps -o pid=,cgroup= -p PID``: alive when its row names that PID, with the unit its
    cgroup names. The cgroup is read alone so that a command line (hostile text, spaces
    and all) can never shift the fields."""
    parts = first_line(text).split(None, 1)
    if not parts or parts[0] != str(pid):
        return ProcState(pid, alive=False)
    return ProcState(pid, alive=True, unit=unit_from_cgroup(parts[1]) if len(parts) > 1 else None)


def parse_ps(text: str) -> list[Proc]:
    """``PS_FIELDS`` rows, then (optionally) ``---`` and ``PS_CGROUP_FIELDS`` rows."""
    head, _, tail = text.partition(f"\n{SECTION}\n")
    cgroups = parse_cgroups(tail)
    rows = (_row(ln, cgroups) for ln in lines(head))
    return [r for r in rows if r is not None]


def parse_pids(text: str) -> list[int]:
    """Every positive integer token (``fuser`` and ``lsof -t`` print bare PIDs)."""
    found: list[int] = []
    for token in re.findall(r"(?<![\w.-])(\d{1,7})(?![\w.-])", text):
        pid = int(token)
        if pid > 0 and pid not in found:
            found.append(pid)
    return found


def server_kind(args: str) -> str | None:
    """'vLLM', 'SGLang', ... if the command line looks like an inference server."""
    for label, pattern in SERVER_PATTERNS:
        if pattern.search(args):
            return label
    return None


def notable_flags(args: str, limit: int = 2) -> list[str]:
    """A few memory/parallelism flags worth showing (``--gpu-memory-utilization 0.95``)."""
    try:
        argv = shlex.split(args)
    except ValueError:
        argv = args.split()
    found = []
    for i, arg in enumerate(argv):
        name, eq, value = arg.partition("=")
        if name in _NOTABLE_FLAGS[:2]:
            val = value if eq else (argv[i + 1] if i + 1 < len(argv) else "")
            found.append(f"{name} {val}".strip())
    return found[:limit]



def parse_states(text: str) -> dict[int, tuple[str, str]]:
    """``ps -eo pid=,stat=,comm=`` -> pid -> (state letters, short name); ``D`` first in
    the state is uninterruptible sleep (stuck in the driver)."""
    out: dict[int, tuple[str, str]] = {}
    for line in lines(text):
        cells = line.split(None, 2)
        if len(cells) >= 2 and cells[0].isdigit() and re.fullmatch(r"[A-Za-z<+.]{1,8}", cells[1]):
            out[int(cells[0])] = (cells[1], cells[2].strip() if len(cells) > 2 else "")
    return out
