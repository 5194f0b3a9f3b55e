"""``sudo [-n] [-E] [-H] [-u root] [--] CMD ARGS...``: the sim user is already root, so run
CMD from PATH (our shims first); bot configurations for non-root users say ``sudo -n``.

A scenario with ``sudo_refuses`` is a host whose sudoers has no rule for the login: every
``sudo -n`` (and ``sudo -n -l``) answers as the real sudo 1.9 does, "sudo: a password is
required", exit status 1 (tests/fixtures/real/sudo_n_password_required.txt).
"""

from __future__ import annotations

import os

TYPE_CHECKING = False  # typing costs every sim command ~5 ms (bot.sim.state)
if TYPE_CHECKING:
    from bot.sim.state import SimCall


NO_ARG = {"-n", "--non-interactive", "-E", "--preserve-env", "-H", "--set-home", "-S"}
LIST = {"-l", "--list"}
REFUSED = "sudo: a password is required"


def listed(argv: list[str], ctx: SimCall) -> int:
    """``sudo -l CMD ARGS``: 0 and the command when the rules allow it, else 1 (silent).

    The rules are the scenario's ``sudo_denied`` prefixes: everything else is allowed.
    """
    text = " ".join(argv)
    denied = ctx.read().get("sudo_denied") or []
    if any(text == d or text.startswith(d.rstrip() + " ") for d in denied):
        return 1
    ctx.print(text)
    return 0


def main(argv: list[str], ctx: SimCall) -> int:
    i, listing = 0, False
    while i < len(argv) and argv[i].startswith("-"):
        if argv[i] == "--":
            i += 1
            break
        if argv[i] in ("-u", "--user"):
            if i + 1 >= len(argv) or argv[i + 1] not in ("root", "0", "#0"):
                ctx.error("sudo: this simulated host only runs commands as root")
                return 1
            i += 2
        elif argv[i] in NO_ARG or argv[i] in LIST:
            listing = listing or argv[i] in LIST
            i += 1
        else:
            ctx.error(f"sudo: unknown option: {argv[i]}")
            return 1
    if i >= len(argv):
        ctx.error("usage: sudo [-n] command")
        return 1
    if ctx.read().get("sudo_refuses"):
        ctx.error(REFUSED)
        return 1
    if listing:
        return listed(argv[i:], ctx)
    ctx.out.flush()
    try:
        os.execvp(argv[i], argv[i:])
    except OSError:
        ctx.error(f"sudo: {argv[i]}: command not found")
    return 1
