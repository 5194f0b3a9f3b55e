"""``kill`` (bash's builtin is disabled on sim hosts by ``simrc``, so this shim answers):
signals only the simulated process table, never a real PID. Messages are bash's.
"""

from __future__ import annotations

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
