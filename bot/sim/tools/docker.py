"""``docker ps``/``inspect`` (with Go-template ``--format`` for plain field paths and
``json``), and the mutating ``stop``/``start``/``update --restart=``. A host with no
containers in its scenario has no docker at all.
"""

from __future__ import annotations

import time

from bot.sim import engine
from bot.sim.tools.systemd_fmt import ago

TYPE_CHECKING = False  # typing costs every sim command ~5 ms (bot.sim.state)
if TYPE_CHECKING:
    import re
    from typing import Any

    from bot.sim.state import SimCall, State

TEMPLATE = r"\{\{\s*(json\s+)?\.([A-Za-z0-9_.]*)\s*\}\}"


def _template() -> re.Pattern[str]:
    """``re`` and ``json`` are imported by the calls that need them (~20 ms a command):
    ``docker ps -aq`` on a host without containers needs neither."""
    import re

    return re.compile(TEMPLATE)  # re keeps compiled patterns cached
PS_HEAD = {"ID": "CONTAINER ID", "Image": "IMAGE", "Command": "COMMAND", "RunningFor": "CREATED",
           "Status": "STATUS", "Ports": "PORTS", "Names": "NAMES", "CreatedAt": "CREATED AT",
           "State": "STATE"}
DEFAULT_PS = ("table {{.ID}}\t{{.Image}}\t{{.Command}}\t{{.RunningFor}}\t{{.Status}}\t"
              "{{.Ports}}\t{{.Names}}")


def ps_fields(box: dict[str, Any], now: float, trunc: bool) -> dict[str, Any]:
    import json

    cmd = json.dumps(box["command"]) if not trunc or len(box["command"]) <= 20 else \
        json.dumps(box["command"][:19] + "…", ensure_ascii=False)
    status = (f"Up {ago(now - box['started']).removesuffix(' ago')}" if box["running"]
              else f"Exited (0) {ago(now - box.get('stopped', now))}")
    return {"ID": box["id"][:12] if trunc else box["id"], "Image": box["image"], "Command": cmd,
            "RunningFor": ago(now - box["created"]), "Status": status, "Ports": box["ports"],
            "Names": box["name"], "State": "running" if box["running"] else "exited",
            "CreatedAt": time.strftime("%Y-%m-%d %H:%M:%S +0000 UTC", time.gmtime(box["created"]))}


def inspect_obj(box: dict[str, Any]) -> dict[str, Any]:
    iso = time.strftime("%Y-%m-%dT%H:%M:%S.000000000Z", time.gmtime(box["started"]))
    return {"Id": box["id"], "Name": "/" + box["name"], "RestartCount": 0,
            "State": {"Status": "running" if box["running"] else "exited",
                      "Running": box["running"], "Pid": box["pid"] if box["running"] else 0,
                      "StartedAt": iso},
            "HostConfig": {"RestartPolicy": {"Name": box["restart_policy"],
                                             "MaximumRetryCount": 0},
                           "DeviceRequests": [{"Driver": "", "Count": -1, "DeviceIDs": None,
                                               "Capabilities": [["gpu"]], "Options": {}}]
                           if box.get("gpus") else None},
            "Config": {"Image": box["image"], "Cmd": box["command"].split()}}


def render(template: str, obj: dict[str, Any]) -> str:
    """The Go-template subset the bot needs: ``{{.A.B}}`` and ``{{json .A}}``."""
    import json

    def sub(m: re.Match[str]) -> str:
        value: Any = obj
        for part in filter(None, m[2].split(".")):
            if not isinstance(value, dict) or part not in value:
                raise KeyError(part)
            value = value[part]
        if m[1]:
            return json.dumps(value)
        if isinstance(value, bool):
            return str(value).lower()
        return json.dumps(value) if isinstance(value, dict | list) else str(value)
    return _template().sub(sub, template.replace("\\t", "\t").replace("\\n", "\n"))


def _table(template: str, rows: list[dict[str, Any]]) -> str:
    body = template.removeprefix("table").strip()
    header = _template().sub(lambda m: PS_HEAD.get(m[2], m[2].upper()), body.replace("\\t", "\t"))
    cells = [header.split("\t")] + [render(body, r).split("\t") for r in rows]
    widths = [max(len(c[i]) for c in cells) for i in range(len(cells[0]))]
    return "".join("   ".join(c.ljust(w) for c, w in zip(row, widths, strict=False)).rstrip() +
                   "\n" for row in cells)


def _ps(ctx: SimCall, state: State, args: list[str]) -> int:
    show_all = any(a in ("-a", "--all") for a in args)
    fmt = next((a.split("=", 1)[1] for a in args if a.startswith("--format=")), None)
    if "--format" in args:
        fmt = args[args.index("--format") + 1]
    if any(a in ("-q", "--quiet") for a in args):
        fmt = "{{.ID}}"
    rows = [ps_fields(b, ctx.now(), "--no-trunc" not in args) for b in state["containers"]
            if b["running"] or show_all]
    fmt = fmt or DEFAULT_PS
    if fmt.startswith("table"):
        ctx.out.write(_table(fmt, rows))
    else:
        ctx.out.write("".join(render(fmt, r) + "\n" for r in rows))
    return 0


def _inspect(ctx: SimCall, state: State, args: list[str]) -> int:
    fmt = None
    names = []
    it = iter(args)
    for a in it:
        if a in ("-f", "--format"):
            fmt = next(it, "")
        elif a.startswith("--format="):
            fmt = a.split("=", 1)[1]
        elif not a.startswith("-"):
            names.append(a)
    found, code = [], 0
    for name in names:
        box = engine.find_container(state, name)
        if box is None:
            ctx.error(f"Error: No such object: {name}")
            code = 1
        else:
            found.append(inspect_obj(box))
    if fmt is not None:
        try:
            ctx.out.write("".join(render(fmt, o) + "\n" for o in found))
        except KeyError as exc:
            ctx.error(f"template parsing error: map has no entry for key {exc}")
            return 1
    elif found or not code:
        import json

        ctx.out.write(json.dumps(found, indent=4) + "\n")
    return code


def _mutate(ctx: SimCall, verb: str, args: list[str]) -> int:
    policy = next((a.split("=", 1)[1] for a in args if a.startswith("--restart=")), None)
    names = [a for a in args if not a.startswith("-")]
    code = 0
    with ctx.mutate() as state:
        for name in names:
            box = engine.find_container(state, name)
            if box is None:
                ctx.error(f"Error response from daemon: No such container: {name}")
                code = 1
                continue
            if verb == "stop":
                engine.stop_container(state, name, ctx.now())
            elif verb == "start":
                engine.start_container(state, name, ctx.now())
            elif verb == "update" and policy:
                box["restart_policy"] = policy
            ctx.print(name)
    return code


def main(argv: list[str], ctx: SimCall) -> int:
    state = ctx.read()
    if not state["containers"]:
        ctx.error("bash: line 1: docker: command not found")
        return 127
    verb, args = (argv[0], argv[1:]) if argv else ("help", [])
    if verb in ("ps", "container") and (verb == "ps" or args[:1] == ["ls"]):
        return _ps(ctx, state, args if verb == "ps" else args[1:])
    if verb == "inspect":
        return _inspect(ctx, state, args)
    if verb in ("stop", "start", "update"):
        return _mutate(ctx, verb, args)
    ctx.error(f"docker: '{verb}' is not a docker command.\nSee 'docker --help'")
    return 1
