"""``systemctl``: read verbs (list-units, list-unit-files, show, status, is-*, cat) and the
mutating ones (stop, start, restart, enable, disable, mask, unmask, kill, daemon-reload),
with systemd's messages (stderr) and exit codes. ``stop_delay_s`` makes a stop block.
"""

from __future__ import annotations

from bot.sim import engine
from bot.sim.tools import systemd_fmt as fmt
from bot.sim.tools.systemctl_act import act
from bot.sim.tools.systemd_fmt import Fail

TYPE_CHECKING = False  # typing costs every sim command ~5 ms (bot.sim.state)
if TYPE_CHECKING:
    from typing import Any

    from bot.sim.state import SimCall, State

NO_SYSTEMD = ("System has not been booted with systemd as init system (PID 1). Can't operate.\n"
              "Failed to connect to bus: Host is down")
FLAGS: dict[str, str | None] = {
    "-a": "all", "--all": "all", "--no-legend": "no_legend", "--no-pager": None,
    "--plain": "plain", "--failed": "failed", "--value": "value", "--now": "now",
    "-q": "quiet", "--quiet": "quiet", "-l": None, "--full": None, "--no-block": None,
    "--no-ask-password": None, "--system": None, "-f": "force", "--force": "force"}
VALUED: dict[str, str | None] = {
    "-t": "type", "--type": "type", "--state": "state", "-p": "property",
    "--property": "property", "-s": "signal", "--signal": "signal", "-n": None,
    "--lines": None, "-o": None, "--output": None, "--kill-whom": None, "-H": None}


def parse(argv: list[str]) -> tuple[list[str], dict[str, Any]]:
    words: list[str] = []
    opts: dict[str, Any] = {"property": []}
    i = 0
    while i < len(argv):
        arg = argv[i]
        key, has_eq, val = arg.partition("=")
        if arg in FLAGS:
            flag = FLAGS[arg]
            if flag:
                opts[flag] = True
        elif key in VALUED:
            if not has_eq:
                if i + 1 >= len(argv):
                    raise Fail(f"systemctl: option requires an argument -- '{arg.lstrip('-')}'")
                i, val = i + 1, argv[i + 1]
            dest = VALUED[key]
            if dest == "property":
                opts["property"] += [p for p in val.split(",") if p]
            elif dest:
                opts[dest] = val
        elif arg.startswith("-"):
            raise Fail(f"systemctl: unrecognized option '{arg}'")
        else:
            words.append(arg)
        i += 1
    return words, opts


def _units(state: State, patterns: list[str], opts: dict[str, Any], files: bool) -> list[Any]:
    types = set(opts.get("type", "").split(",")) - {""}
    states = set(opts.get("state", "").split(",")) - {""}
    if opts.get("failed"):
        states.add("failed")
    chosen = []
    for name in sorted(state["units"]):
        unit = state["units"][name]
        if types and name.rsplit(".", 1)[-1] not in types:
            continue
        if not fmt.match(name, patterns):
            continue
        unit_states = ({unit["unit_file_state"]} if files
                       else {unit["load_state"], unit["active_state"], unit["sub_state"]})
        if states and not states & unit_states:
            continue
        if not files and not (opts.get("all") or states) and \
                unit["active_state"] == "inactive":
            continue
        chosen.append(unit)
    return chosen


def _read_verb(ctx: SimCall, verb: str, args: list[str], opts: dict[str, Any]) -> int:
    state = ctx.read()
    legend = not opts.get("no_legend")
    if verb == "list-units":
        ctx.out.write(fmt.list_units(_units(state, args, opts, False), legend=legend,
                                     show_all=bool(opts.get("all")), plain=bool(opts.get("plain"))))
        return 0
    if verb == "list-unit-files":
        ctx.out.write(fmt.list_unit_files(_units(state, args, opts, True), legend=legend))
        return 0
    names = [engine.normalize_unit(a) for a in args]
    if verb == "show":
        boot = float(state["boot"]["time"])
        blocks = [fmt.show(fmt.properties(state["units"].get(n), n, boot), opts["property"],
                           bool(opts.get("value"))) for n in names or ["-.slice"]]
        ctx.out.write("\n".join(blocks))
        return 0
    return _query_verb(ctx, state, verb, args, names, opts)


def _query_verb(ctx: SimCall, state: State, verb: str, args: list[str], names: list[str],
                opts: dict[str, Any]) -> int:
    quiet = bool(opts.get("quiet"))
    if verb == "status":
        return _status(ctx, state, args)
    if verb == "cat":
        return _cat(ctx, state, names)
    code = 0
    for name in names:
        unit = state["units"].get(name)
        if verb == "is-active":
            word = unit["active_state"] if unit else "inactive"
            ok = word == "active"
        elif verb == "is-failed":
            word = unit["active_state"] if unit else "inactive"
            ok = word == "failed"
        else:
            if unit is None:
                raise Fail(f"Failed to get unit file state for {name}: No such file or directory")
            word = unit["unit_file_state"]
            ok = word in ("enabled", "static")
        if not quiet:
            ctx.print(word)
        code = code if ok else (1 if verb != "is-active" else 3)
    return code


def _status(ctx: SimCall, state: State, args: list[str]) -> int:
    texts, code = [], 0
    for arg in args:
        name = _unit_of(state, arg) if arg.isdigit() else engine.normalize_unit(arg)
        unit = state["units"].get(name)
        if unit is None:
            ctx.error(f"Unit {name} could not be found.")
            code = 4
            continue
        texts.append(fmt.status(state, unit, ctx.now()))
        code = code or (0 if unit["active_state"] == "active" else 3)
    ctx.out.write("\n".join(texts))
    return code


def _unit_of(state: State, pid_text: str) -> str:
    proc = engine.visible_process(state, int(pid_text))
    if proc is None:
        raise Fail(f"Failed to get unit for PID {pid_text}: PID {pid_text} does not exist.")
    owner = proc["owner"]
    unit = {"systemd": owner["name"], "cron": "cron.service", "docker": "docker.service"}.get(
        owner["kind"])
    if unit is None:
        raise Fail(f"Failed to get unit for PID {pid_text}: PID {pid_text} does not belong to "
                   "any loaded unit.")
    return unit


def _cat(ctx: SimCall, state: State, names: list[str]) -> int:
    for name in names:
        unit = state["units"].get(name)
        if unit is None:
            raise Fail(f"No files found for {name}.")
        ctx.out.write(fmt.cat(unit))
    return 0


READ_VERBS = {"list-units", "list-unit-files", "show", "status", "is-active", "is-enabled",
              "is-failed", "cat"}


def main(argv: list[str], ctx: SimCall) -> int:
    try:
        words, opts = parse(argv)
        verb, args = (words[0], words[1:]) if words else ("list-units", [])
        if not ctx.read().get("systemd", True):
            raise Fail(NO_SYSTEMD)
        if verb in READ_VERBS:
            return _read_verb(ctx, verb, args, opts)
        return act(ctx, verb, args, opts)
    except Fail as exc:
        ctx.error(str(exc))
        return exc.code
