"""A scenario's own programs (``commands:``): the answer kept for the exact words, and the
answers it changes once it has run (``then``). Any command an extension names is
answered this way on a simulated host, logged like every tool; words the scenario did not
list are refused as a real program refuses an unknown option (exit 2)."""

from __future__ import annotations

TYPE_CHECKING = False  # typing costs every sim command ~5 ms (bot.sim.state)
if TYPE_CHECKING:
    from bot.sim.state import SimCall


def answer(program: str, argv: list[str], ctx: SimCall) -> int:
    line = " ".join([program, *argv])
    found = ctx.read().get("commands", {}).get(line)
    if found is None:
        ctx.error(f"{program}: no answer for {' '.join(argv) or '(no arguments)'} "
                  "on this simulated host")
        return 2
    if found["then"]:
        with ctx.mutate() as state:
            for other, said in found["then"].items():
                state["commands"][other] = {**said, "then": {}}
    ctx.out.write(found["stdout"])
    ctx.err.write(found["stderr"])
    return int(found["exit_status"])
