"""``kill`` (bash's builtin is disabled on sim hosts by ``simrc``, so this shim answers):
signals the simulated process table, never a machine's PID. Messages are bash's.

One exception, what bash's own ``kill "$!"`` does on a real host: a probe that started a
background job (the looping ``nvidia-smi`` sampler) ends it. That job is a real process of
this very session (same process group, which sshd gave the session alone), so only it can
be signalled: :func:`own_jobs` says when every target is one, and ``bot.sim.run`` then
forwards the signal and logs it as job control, not as a call on the simulated host.
"""

from __future__ import annotations

import os

from bot.sim import engine

TYPE_CHECKING = False  # typing costs every sim command ~5 ms (bot.sim.state)
if TYPE_CHECKING:
    from bot.sim.state import SimCall

SIGNALS = {"0": "0", "1": "HUP", "2": "INT", "3": "QUIT", "6": "ABRT", "9": "KILL",
           "10": "USR1", "12": "USR2", "13": "PIPE", "15": "TERM", "18": "CONT", "19": "STOP"}
NAMES = set(SIGNALS.values())


def signal_name(text: str) -> str | None:
    """``9``, ``KILL``, ``SIGKILL``, ``sigkill`` -> ``KILL``; None when unknown."""
    if text.isdigit():
        return SIGNALS.get(text)
    name = text.upper().removeprefix("SIG")
    return name if name in NAMES else None


def parse(argv: list[str]) -> tuple[str, list[str]]:
    signal, i = "TERM", 0
    while i < len(argv) and argv[i].startswith("-") and argv[i] != "--":
        arg = argv[i]
        if arg in ("-s", "-n"):
            if i + 1 >= len(argv):
                raise ValueError(f"{arg}: option requires an argument")
            name, i = signal_name(argv[i + 1]), i + 2
            if name is None:
                raise ValueError(f"{argv[i - 1]}: invalid signal specification")
        elif arg[1:].lstrip("-").isdigit() and arg[1:].startswith("-"):
            break  # a negative pid (process group)
        else:
            name, i = signal_name(arg[1:]), i + 1
            if name is None:
                raise ValueError(f"{arg[1:]}: invalid signal specification")
        signal = name
    if i < len(argv) and argv[i] == "--":
        i += 1
    return signal, argv[i:]


def main(argv: list[str], ctx: SimCall) -> int:
    if argv[:1] == ["-l"]:
        ctx.print(" ".join(f"{n}) SIG{s}" for n, s in SIGNALS.items() if n != "0"))
        return 0
    try:
        signal, targets = parse(argv)
    except ValueError as exc:
        ctx.error(f"bash: kill: {exc}")
        return 1
    if not targets:
        ctx.error("kill: usage: kill [-s sigspec | -n signum | -sigspec] pid | jobspec ... or "
                  "kill -l [sigspec]")
        return 2
    code = 0
    with ctx.mutate() as state:
        for target in targets:
            text = target.lstrip("-")
            if not text.isdigit():
                ctx.error(f"bash: kill: {target}: arguments must be process or job IDs")
                code = 1
            elif engine.visible_process(state, int(text)) is None:
                ctx.error(f"bash: kill: ({text}) - No such process")
                code = 1
            else:
                engine.kill_process(state, int(text), signal, ctx.now())
    return code


def own_jobs(argv: list[str]) -> tuple[int, list[int]] | None:
    """``(signal number, pids)`` when ``argv`` signals only real processes of the caller's
    own process group (its background jobs), else None: then the simulated table answers."""
    try:
        name, targets = parse(argv)
    except ValueError:
        return None
    number = {v: int(k) for k, v in SIGNALS.items()}.get(name)
    if number is None or not targets or not all(t.isdigit() for t in targets):
        return None
    pids = [int(t) for t in targets]
    group = os.getpgid(0)
    for pid in pids:
        try:
            if pid <= 1 or pid == os.getpid() or os.getpgid(pid) != group:
                return None
        except OSError:
            return None
    return number, pids


def signal_jobs(number: int, pids: list[int]) -> int:
    code = 0
    for pid in pids:
        try:
            os.kill(pid, number)
        except OSError:
            code = 1
    return code
