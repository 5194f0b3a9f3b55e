"""``ps`` (procps-ng 4): ``aux``, ``-ef``, ``-eo``/``-o`` custom fields with ``=`` header
renaming, ``-p`` pid lists, ``-C`` names, ``--no-headers``, ``--sort``. Non-printable
characters in names and command lines show as ``?`` as the real tool prints them.
"""

from __future__ import annotations

import time

from bot.sim import engine

TYPE_CHECKING = False  # typing costs every sim command ~5 ms (bot.sim.state)
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

    from bot.sim.state import SimCall

    Proc = dict[str, Any]
    Getter = Callable[[Proc, float, dict[str, Any]], str]




def printable(text: str) -> str:
    return "".join(c if c.isprintable() else "?" for c in text)


def etime(seconds: float) -> str:
    s = int(max(seconds, 0))
    days, rest = divmod(s, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days}-{hours:02d}:{minutes:02d}:{secs:02d}"
    if hours:
        return f"{hours:02d}:{minutes:02d}:{secs:02d}"
    return f"{minutes:02d}:{secs:02d}"


def _hms(seconds: int) -> str:
    days, rest = divmod(seconds, 86400)
    text = f"{rest // 3600:02d}:{rest % 3600 // 60:02d}:{rest % 60:02d}"
    return f"{days}-{text}" if days else text


def _cputime(p: Proc, now: float) -> int:
    return int(p["pcpu"] / 100 * max(now - p["start"], 0))


def _start(p: Proc, now: float) -> str:
    fmt = "%H:%M" if now - p["start"] < 86400 else "%b%d"
    return time.strftime(fmt, time.gmtime(p["start"]))


def _cgroup(p: Proc, state: dict[str, Any]) -> str:
    kind, name = p["owner"]["kind"], p["owner"]["name"]
    if kind == "systemd":
        return f"0::/system.slice/{name}"
    if kind == "docker":
        box = next((c for c in state["containers"] if c["name"] == name), None)
        return f"0::/system.slice/docker-{box['id'] if box else name}.scope"
    if kind == "cron":
        return "0::/system.slice/cron.service"
    return "0::/init.scope" if p["pid"] == 1 else "0::/user.slice/user-0.slice/session-1.scope"


# name -> (header, width, right-aligned, getter)
FIELDS: dict[str, tuple[str, int, bool, Getter]] = {
    "pid": ("PID", 7, True, lambda p, n, s: str(p["pid"])),
    "ppid": ("PPID", 7, True, lambda p, n, s: str(p["ppid"])),
    "user": ("USER", 8, False, lambda p, n, s: p["user"]),
    "uid": ("UID", 5, True, lambda p, n, s: "0" if p["user"] == "root" else "1000"),
    "lstart": ("STARTED", 24, False,
               lambda p, n, s: time.strftime("%a %b %e %H:%M:%S %Y", time.gmtime(p["start"]))),
    "etimes": ("ELAPSED", 7, True, lambda p, n, s: str(int(max(n - p["start"], 0)))),
    "etime": ("ELAPSED", 11, True, lambda p, n, s: etime(n - p["start"])),
    "rss": ("RSS", 5, True, lambda p, n, s: str(p["rss_kib"])),
    "vsz": ("VSZ", 6, True, lambda p, n, s: str(p["vsz_kib"])),
    "pcpu": ("%CPU", 4, True, lambda p, n, s: f"{p['pcpu']:.1f}"),
    "pmem": ("%MEM", 4, True, lambda p, n, s: f"{p['pmem']:.1f}"),
    "c": ("C", 2, True, lambda p, n, s: str(int(p["pcpu"]))),
    "stat": ("STAT", 4, False, lambda p, n, s: p["stat"]),
    "tty": ("TT", 8, False, lambda p, n, s: "?"),
    "start": ("START", 5, True, lambda p, n, s: _start(p, n)),
    "time": ("TIME", 8, True, lambda p, n, s: _hms(_cputime(p, n))),
    "bsdtime": ("TIME", 6, True,
                lambda p, n, s: f"{_cputime(p, n) // 60}:{_cputime(p, n) % 60:02d}"),
    "comm": ("COMMAND", 15, False, lambda p, n, s: printable(p["comm"])),
    "args": ("COMMAND", 27, False, lambda p, n, s: printable(p["args"])),
    "cgroup": ("CGROUP", 30, False, lambda p, n, s: _cgroup(p, s)),
}
ALIASES = {"%cpu": "pcpu", "%mem": "pmem", "cmd": "args", "command": "args", "ucomm": "comm",
           "ucmd": "comm", "euser": "user", "uname": "user", "rssize": "rss", "vsize": "vsz",
           "tname": "tty", "tt": "tty", "bsdstart": "start", "pgid": "pid", "sid": "pid",
           "cputime": "time", "stime": "start"}
AUX = ["user,pid,pcpu,pmem,vsz,rss", "tty=TTY", "stat,start,bsdtime,args"]
EF = ["user=UID", "pid,ppid", "c=C", "stime=STIME", "tty=TTY", "time", "args=CMD"]


USAGE = ("\nUsage:\n ps [options]\n\n Try 'ps --help <simple|list|output|threads|misc|all>'\n"
         "  or 'ps --help <s|l|o|t|m|a>'\n for additional help text.\n\n"
         "For more details see ps(1).")


class PsError(Exception):
    pass


def parse_format(specs: list[str]) -> list[tuple[str, str | None, int | None]]:
    """``pid,args=CMD`` -> [(field, header or None, width or None)]; ``x=`` blanks a header."""
    cols: list[tuple[str, str | None, int | None]] = []
    for spec in specs:
        for part in _split_specs(spec):
            name, eq, header = part.partition("=")
            name, _, width = name.partition(":")
            key = ALIASES.get(name.lower(), name.lower())
            if key not in FIELDS:
                raise PsError(f'error: unknown user-defined format specifier "{name}"')
            cols.append((key, header if eq else None, int(width) if width.isdigit() else None))
    return cols


def _split_specs(spec: str) -> list[str]:
    """Commas separate fields; a non-empty header after ``=`` runs to the end (``pid=,args=``
    is two blank headers, ``args=CMD,X`` one header ``CMD,X``)."""
    out: list[str] = []
    for piece in spec.split(","):
        if out and "=" in out[-1] and not out[-1].endswith("="):
            out[-1] += "," + piece
        elif piece:
            out.append(piece)
    return out


def render(state: dict[str, Any], procs: list[Proc], cols: list[tuple[str, str | None, int | None]],
           now: float, headers: bool) -> str:
    lines = []
    heads = [FIELDS[k][0] if h is None else h for k, h, _ in cols]
    if headers and any(heads):
        lines.append(_row(heads, cols))
    for p in procs:
        lines.append(_row([FIELDS[k][3](p, now, state) for k, _, _ in cols], cols))
    return "".join(line.rstrip() + "\n" for line in lines)


def _row(values: list[str], cols: list[tuple[str, str | None, int | None]]) -> str:
    cells = []
    for i, ((key, _, width), value) in enumerate(zip(cols, values, strict=True)):
        w = width or FIELDS[key][1]
        last = i == len(cols) - 1
        if key == "user" and len(value) > w:
            value = value[: w - 1] + "+"  # procps marks a cut user name with '+'

        cells.append(value.rjust(w) if FIELDS[key][2] else (value if last else value.ljust(w)))
    return " ".join(cells)


def _select(opts: dict[str, Any], procs: list[Proc]) -> list[Proc]:
    if opts["pids"] is not None:
        return [p for p in procs if p["pid"] in opts["pids"]]
    if opts["names"] is not None:
        return [p for p in procs if p["comm"] in opts["names"]]
    return procs if opts["all"] else []


def _pid_list(text: str) -> list[int]:
    try:
        return [int(x) for x in text.replace(",", " ").split()]
    except ValueError:
        raise PsError("error: process ID list syntax error") from None


def _sort(procs: list[Proc], spec: str | None, now: float, state: dict[str, Any]) -> list[Proc]:
    if not spec:
        return sorted(procs, key=lambda p: p["pid"])
    key = spec.lstrip("+-")
    field = ALIASES.get(key, key)
    if field not in FIELDS:
        raise PsError("error: unknown sort specifier")
    getter = FIELDS[field][3]

    def k(p: Proc) -> Any:
        value = getter(p, now, state)
        try:
            return (0, float(value), "")
        except ValueError:
            return (1, 0.0, value)
    return sorted(procs, key=k, reverse=spec.startswith("-"))


def _dash(arg: str, argv: list[str], i: int, opts: dict[str, Any]) -> int:
    """Unix-style cluster such as ``-eo`` or ``-p``; returns the next index."""
    letters = arg[1:]
    for j, ch in enumerate(letters):
        rest = letters[j + 1:]
        if ch in "eA":
            opts["all"] = True
        elif ch == "f":
            opts["format"].extend(EF)
        elif ch in "opqC":
            value = rest or (argv[i + 1] if i + 1 < len(argv) else "")
            if not value:
                raise PsError("error: list of process IDs must follow -p" if ch in "pq"
                              else "error: improper list")
            i = i if rest else i + 1
            _take(opts, ch, value)
            break
        elif ch not in "wHlyjMLT":
            if ch == "a" and letters == "aux":
                _bsd("aux", opts)
                break
            raise PsError("error: unsupported SysV option")
    return i + 1


def _take(opts: dict[str, Any], ch: str, value: str) -> None:
    if ch == "o":
        opts["format"].append(value)
    elif ch in "pq":
        opts["pids"] = (opts["pids"] or []) + _pid_list(value)
    else:
        opts["names"] = (opts["names"] or []) + value.split(",")


def _bsd(arg: str, opts: dict[str, Any]) -> None:
    if "a" in arg or "x" in arg:
        opts["all"] = True
    if "u" in arg:
        opts["format"].extend(AUX)
    if "h" in arg:
        opts["headers"] = False


def parse_args(argv: list[str]) -> dict[str, Any]:
    opts: dict[str, Any] = {"format": [], "pids": None, "names": None, "headers": True,
                            "all": False, "sort": None}
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg.startswith("--"):
            name, eq, value = arg[2:].partition("=")
            if name in ("no-headers", "no-heading", "noheaders"):
                opts["headers"] = False
            elif name in ("pid", "format", "sort", "ppid"):
                if not eq:
                    i += 1
                    value = argv[i] if i < len(argv) else ""
                if name == "pid":
                    _take(opts, "p", value)
                elif name == "format":
                    opts["format"].append(value)
                elif name == "sort":
                    opts["sort"] = value
            elif name not in ("cols", "columns", "width", "forest"):
                raise PsError("error: unknown gnu long option")
            i += 1
        elif arg.startswith("-"):
            i = _dash(arg, argv, i, opts)
        elif arg[0].isdigit():
            _take(opts, "p", arg)
            i += 1
        else:
            if arg.endswith("o") and i + 1 < len(argv):  # BSD "axo FIELDS"
                opts["format"].append(argv[i + 1])
                i += 1
            _bsd(arg, opts)
            i += 1
    return opts


def main(argv: list[str], ctx: SimCall) -> int:
    try:
        opts = parse_args(argv)
        cols = parse_format(opts["format"] or ["pid", "tty=TTY", "time", "comm=CMD"])
    except PsError as exc:
        ctx.error(str(exc))
        ctx.error(USAGE)
        return 1
    state = ctx.read()
    now = ctx.now()
    try:
        procs = _sort(_select(opts, engine.visible_processes(state)), opts["sort"], now, state)
    except PsError as exc:
        ctx.error(str(exc))
        return 1
    ctx.out.write(render(state, procs, cols, now, opts["headers"]))
    return 0 if procs or (opts["pids"] is None and opts["names"] is None) else 1
