"""Pure formatters for ``systemctl``'s read-only verbs, in systemd 252's output (Debian 12)."""

from __future__ import annotations

import time

from bot.sim.engine import find_process, unit_processes

TYPE_CHECKING = False  # typing costs every sim command ~5 ms (bot.sim.state)
if TYPE_CHECKING:
    from typing import Any

    Unit = dict[str, Any]
    State = dict[str, Any]


class Fail(Exception):
    """What systemctl prints on stderr before it exits ``code``."""

    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(message)
        self.code = code


LEGEND = ("LOAD   = Reflects whether the unit definition was properly loaded.\n"
          "ACTIVE = The high-level unit activation state, i.e. generalization of SUB.\n"
          "SUB    = The low-level unit activation state, values depend on unit type.")
SHOW_ORDER = ("Type", "Restart", "RestartUSec", "MainPID", "ExecMainPID", "NRestarts",
              "ControlGroup", "ExecStart", "Result", "User", "Id", "Names", "WantedBy",
              "Description", "LoadState", "ActiveState", "SubState", "FragmentPath",
              "UnitFileState", "UnitFilePreset", "ActiveEnterTimestamp",
              "ActiveExitTimestamp", "CanStart", "CanStop")


def clean(text: str) -> str:
    """Control characters as C escapes, as systemd prints untrusted strings."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def ts(epoch: float) -> str:
    return time.strftime("%a %Y-%m-%d %H:%M:%S UTC", time.gmtime(epoch)) if epoch else ""


def _mono(epoch: float, boot_time: float) -> str:
    return str(int(max(epoch - boot_time, 0.0) * 1e6)) if epoch and boot_time else "0"


def ago(seconds: float) -> str:
    s = int(max(seconds, 0))
    if s < 60:
        return f"{s}s ago"
    if s < 3600:
        return f"{s // 60}min {s % 60}s ago" if s % 60 else f"{s // 60}min ago"
    if s < 86400:
        return f"{s // 3600}h {s % 3600 // 60}min ago"
    days = s // 86400
    return f"{days} day{'s' if days > 1 else ''} {s % 86400 // 3600}h ago"


def _usec(seconds: float) -> str:
    """systemd's time spans: ``100ms``, ``10s``, ``1min 30s``."""
    ms = round(seconds * 1000)
    if ms < 1000:
        return f"{ms}ms"
    minutes, secs = divmod(seconds, 60)
    if minutes < 1:
        return f"{seconds:g}s"
    return f"{minutes:g}min {secs:g}s" if secs else f"{minutes:g}min"


def _exec_pre(unit: Unit) -> str:
    pre = unit.get("exec_start_pre") or ""
    if not pre:
        return ""
    return (f"{{ path={pre.split(' ', 1)[0]} ; argv[]={pre} ; ignore_errors=no ; "
            "start_time=[n/a] ; stop_time=[n/a] ; pid=0 ; code=(null) ; status=0/0 }")


def _exec_start(unit: Unit) -> str:
    if not unit["exec_start"]:
        return ""
    path = unit["exec_start"].split(" ", 1)[0]
    start = f"[{ts(unit['active_enter'])}]" if unit["active_enter"] else "[n/a]"
    return (f"{{ path={path} ; argv[]={unit['exec_start']} ; ignore_errors=no ; "
            f"start_time={start} ; stop_time=[n/a] ; pid={unit['main_pid']} ; code=(null) ; "
            f"status=0/0 }}")


def properties(unit: Unit | None, name: str, boot_time: float = 0.0) -> dict[str, str]:
    """``systemctl show`` properties of one unit; an unknown unit shows not-found.
    ``boot_time`` (epoch) gives the ``…Monotonic`` timestamps (µs since boot)."""
    if unit is None:
        return {"Id": name, "Names": name, "Description": name, "LoadState": "not-found",
                "ActiveState": "inactive", "SubState": "dead", "UnitFileState": "",
                "FragmentPath": "", "MainPID": "0", "NRestarts": "0", "Restart": "no",
                "ControlGroup": "", "ExecStart": "", "WantedBy": "", "Result": "success",
                "ActiveEnterTimestamp": "", "ActiveExitTimestamp": ""}
    running = unit["active_state"] in ("active", "activating", "deactivating")
    return {
        "Type": "simple", "Restart": unit["restart"], "RestartUSec": _usec(unit["restart_sec"]),
        "MainPID": str(unit["main_pid"]), "ExecMainPID": str(unit["main_pid"]),
        "NRestarts": str(unit["n_restarts"]),
        "ControlGroup": f"/system.slice/{unit['name']}" if running else "",
        "ExecStart": _exec_start(unit), "Result": "success", "User": unit["user"],
        "Id": unit["name"], "Names": unit["name"],
        "WantedBy": unit["wanted_by"] if unit["unit_file_state"] == "enabled" else "",
        "Description": clean(unit["description"]), "LoadState": unit["load_state"],
        "ActiveState": unit["active_state"], "SubState": unit["sub_state"],
        "FragmentPath": unit["fragment_path"], "UnitFileState": unit["unit_file_state"],
        "UnitFilePreset": unit["preset"], "ActiveEnterTimestamp": ts(unit["active_enter"]),
        "ActiveEnterTimestampMonotonic": _mono(unit["active_enter"], boot_time),
        "ActiveExitTimestamp": ts(unit.get("active_exit", 0)),
        "CanStart": "no" if unit["load_state"] == "masked" else "yes", "CanStop": "yes",
        "TimeoutStopUSec": _usec(unit.get("timeout_stop_sec", 90.0)),
        "DropInPaths": " ".join(unit.get("drop_in_paths") or []),
        "ExecStartPre": _exec_pre(unit),
    }


def show(props: dict[str, str], wanted: list[str], value_only: bool) -> str:
    keys = wanted or [k for k in SHOW_ORDER if k in props]
    lines = [props.get(k, "") if value_only else f"{k}={props.get(k, '')}" for k in keys]
    return "".join(line + "\n" for line in lines)


WILDCARDS = frozenset("*?[")


def match(name: str, patterns: list[str]) -> bool:
    if not any(WILDCARDS & set(p) for p in patterns):
        return not patterns or name in patterns  # fnmatch imports ``re``: ~15 ms a command
    import fnmatch

    return any(fnmatch.fnmatchcase(name, p) for p in patterns)


def _table(rows: list[list[str]], header: list[str]) -> list[str]:
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header) - 1)]
    return [" ".join([*(c.ljust(w) for c, w in zip(r, widths, strict=False)), r[-1]]).rstrip()
            for r in [header, *rows]]


def list_units(units: list[Unit], *, show_all: bool, legend: bool, plain: bool) -> str:
    rows, marks = [], []
    for u in units:
        rows.append([clean(u["name"]), u["load_state"], u["active_state"], u["sub_state"],
                     clean(u["description"])])
        bad = u["active_state"] == "failed" or u["load_state"] != "loaded"
        marks.append("● " if bad and not plain else "  ")
    lines = _table(rows, ["UNIT", "LOAD", "ACTIVE", "SUB", "DESCRIPTION"])
    out = [("  " + lines[0]) if legend else None]
    out += [m + line for m, line in zip(marks, lines[1:], strict=True)]
    text = "\n".join(line for line in out if line is not None)
    if legend:
        tail = ("" if show_all else " Pass --all to see loaded but inactive units, too.")
        text += (f"\n\n{LEGEND}\n\n{len(rows)} loaded units listed.{tail}\n"
                 "To show all installed unit files use 'systemctl list-unit-files'.")
    return text + "\n" if text else ""


def list_unit_files(units: list[Unit], *, legend: bool) -> str:
    rows = [[u["fragment_path"].rsplit("/", 1)[-1], u["unit_file_state"], u["preset"]]
            for u in units]
    lines = _table(rows, ["UNIT FILE", "STATE", "PRESET"])
    body = lines if legend else lines[1:]
    text = "\n".join(body)
    if legend:
        text += f"\n\n{len(rows)} unit files listed."
    return text + "\n" if text else ""


def cat(unit: Unit) -> str:
    if unit["unit_file_state"] == "masked":
        return f"# Unit {unit['name']} is masked.\n"
    restart = f"Restart={unit['restart']}\nRestartSec={unit['restart_sec']:g}\n"
    install = f"\n[Install]\nWantedBy={unit['wanted_by']}\n" if unit["wanted_by"] else ""
    return (f"# {unit['fragment_path']}\n[Unit]\nDescription={unit['description']}\n"
            f"After=network-online.target\nWants=network-online.target\n\n[Service]\n"
            f"Type=simple\nUser={unit['user']}\nExecStart={unit['exec_start']}\n{restart}"
            f"{install}")


def _mib(kib: int) -> str:
    gib = kib / 1024 / 1024
    return f"{gib:.1f}G" if gib >= 1 else f"{kib / 1024:.1f}M"


def status(state: State, unit: Unit, now: float) -> str:
    """``systemctl status UNIT`` (header block, cgroup tree, last journal line)."""
    active = unit["active_state"]
    dot = {"active": "●", "failed": "×"}.get(active, "○")
    loaded = (f"masked (Reason: Unit {unit['name']} is masked.)" if unit["load_state"] == "masked"
              else f"loaded ({unit['fragment_path']}; {unit['unit_file_state']}; "
                   f"preset: {unit['preset']})")
    lines = [f"{dot} {clean(unit['name'])} - {clean(unit['description'])}",
             f"     Loaded: {loaded}"]
    if active == "active":
        lines.append(f"     Active: active ({unit['sub_state']}) since "
                     f"{ts(unit['active_enter'])}; {ago(now - unit['active_enter'])}")
    elif unit.get("active_exit"):
        lines.append(f"     Active: {active} ({unit['sub_state']}) since "
                     f"{ts(unit['active_exit'])}; {ago(now - unit['active_exit'])}")
    else:
        lines.append(f"     Active: {active} ({unit['sub_state']})")
    procs = unit_processes(state, unit["name"])
    main = find_process(state, unit["main_pid"]) if unit["main_pid"] else None
    if main:
        lines.append(f"   Main PID: {main['pid']} ({main['comm']})")
    if procs:
        rss = sum(p["rss_kib"] for p in procs)
        lines += [f"      Tasks: {len(procs)} (limit: 629145)", f"     Memory: {_mib(rss)}",
                  f"     CGroup: /system.slice/{unit['name']}"]
        lines += [f"             {'└─' if i == len(procs) - 1 else '├─'}{p['pid']} "
                  f"{clean(p['args'])}" for i, p in enumerate(procs)]
    return "\n".join(lines) + "\n"
