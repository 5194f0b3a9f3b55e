"""Small host tools: ``uptime [-s|-p]``, ``who -b``, ``crontab -l [-u USER]``, ``free``,
``dmesg``, ``hostname``. Output formats of procps-ng 4, util-linux 2.38 and Debian cron.
"""

from __future__ import annotations

import time

TYPE_CHECKING = False  # typing costs every sim command ~5 ms (bot.sim.state)
if TYPE_CHECKING:
    from bot.sim.state import SimCall


DAY = 86400


def uptime_text(boot: float, now: float) -> str:
    up = int(now - boot)
    days, rest = divmod(up, DAY)
    hours, minutes = rest // 3600, rest % 3600 // 60
    span = f"{days} day{'s' if days != 1 else ''}, " if days else ""
    span += f"{hours:2d}:{minutes:02d}" if hours else f"{minutes} min"
    clock = time.strftime("%H:%M:%S", time.gmtime(now))
    return f" {clock} up {span},  1 user,  load average: 0.08, 0.11, 0.09"


def main_uptime(argv: list[str], ctx: SimCall) -> int:
    boot = ctx.read()["boot"]["time"]
    if "-s" in argv or "--since" in argv:
        ctx.print(time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(boot)))
    elif "-p" in argv or "--pretty" in argv:
        up = int(ctx.now() - boot)
        ctx.print(f"up {up // 3600} hours, {up % 3600 // 60} minutes" if up >= 3600
                  else f"up {up // 60} minutes")
    else:
        ctx.print(uptime_text(boot, ctx.now()))
    return 0


def main_who(argv: list[str], ctx: SimCall) -> int:
    boot = ctx.read()["boot"]["time"]
    if any(a in ("-b", "--boot") for a in argv):
        ctx.print(f"         system boot  {time.strftime('%Y-%m-%d %H:%M', time.gmtime(boot))}")
    else:
        ctx.print(f"root     pts/0        {time.strftime('%Y-%m-%d %H:%M', time.gmtime(boot + 60))}"
                  " (10.1.230.1)")
    return 0


def main_crontab(argv: list[str], ctx: SimCall) -> int:
    user = "root"
    if "-u" in argv:
        idx = argv.index("-u")
        if idx + 1 >= len(argv):
            ctx.error("crontab: option requires an argument -- 'u'")
            return 1
        user = argv[idx + 1]
    if "-l" not in argv:
        ctx.error("crontab: only -l is available on this simulated host")
        return 1
    lines = ctx.read()["crontabs"].get(user) or []
    if not lines:
        ctx.error(f"no crontab for {user}")
        return 1
    ctx.out.write("".join(line + "\n" for line in lines))
    return 0


def main_free(argv: list[str], ctx: SimCall) -> int:
    mem = ctx.read()["memory"]
    total, used = mem["total"], mem["used"]
    cache = min(total // 20, total - used)
    free = total - used - cache
    div = 1 if "-b" in argv else (1024**3 if "-g" in argv else (1024**2 if "-m" in argv else 1024))
    vals = [v // div for v in (total, used, free, 0, cache, total - used)]
    ctx.print(f"{'':15}{'total':>12}{'used':>12}{'free':>12}{'shared':>12}{'buff/cache':>12}"
              f"{'available':>12}")
    ctx.print(f"{'Mem:':<15}" + "".join(f" {v:>11}" for v in vals))
    ctx.print(f"{'Swap:':<15}" + "".join(f" {0:>11}" for _ in range(3)))
    return 0


def main_dmesg(argv: list[str], ctx: SimCall) -> int:
    ctx.out.write("".join(line + "\n" for line in ctx.read()["dmesg"]))
    return 0


def main_hostname(argv: list[str], ctx: SimCall) -> int:
    ctx.print(ctx.read()["host"])
    return 0


def main(argv: list[str], ctx: SimCall) -> int:
    return main_hostname(argv, ctx)
