"""``lsof`` (``+L1`` deleted-but-open files, device paths, ``-p``, ``-t``) and ``fuser``
(``-v``, ``-k``, ``-m``-less device lookups). Every GPU process holds ``/dev/nvidiactl``,
``/dev/nvidia-uvm`` and one ``/dev/nvidiaN`` per GPU it uses; nvidia-persistenced holds
all GPUs, as on a real host (a bot must not blame it), and so does a monitor that keeps the
device files open without GPU memory (``holds_devices``: dcgm-exporter, nv-hostengine).
"""

from __future__ import annotations

from bot.sim import engine
from bot.sim.tools.kill import signal_name

TYPE_CHECKING = False  # typing costs every sim command ~5 ms (bot.sim.state)
if TYPE_CHECKING:
    from typing import Any

    from bot.sim.state import SimCall, State

    Open = tuple[dict[str, Any], str, str]  # (process, fd, path)

LSOF_HEAD = ("COMMAND", "PID", "USER", "FD", "TYPE", "DEVICE", "SIZE/OFF", "NLINK", "NODE",
             "NAME")


def devices(state: State) -> list[str]:
    if not state["gpus"]:
        return []
    return ["/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools",
            *(f"/dev/nvidia{g['index']}" for g in state["gpus"])]


def device_opens(state: State) -> list[Open]:
    opens: list[Open] = []
    for proc in sorted(engine.visible_processes(state), key=lambda p: p["pid"]):
        gpus = sorted(int(i) for i in proc["gpu_memory_mib"])
        if proc["comm"].startswith("nvidia-persiste") or proc.get("holds_devices"):
            gpus = [g["index"] for g in state["gpus"]]
            paths = ["/dev/nvidiactl", *(f"/dev/nvidia{i}" for i in gpus)]
        elif gpus:
            paths = ["/dev/nvidiactl", "/dev/nvidia-uvm", *(f"/dev/nvidia{i}" for i in gpus)]
        else:
            continue
        opens += [(proc, "mem", p) for p in paths]
    return opens


def _rdev(path: str) -> str:
    tail = path.removeprefix("/dev/nvidia")
    return f"195,{tail}" if tail.isdigit() else {"ctl": "195,255"}.get(tail, "507,0")


def lsof_rows(state: State, opens: list[Open], deleted: bool) -> list[list[str]]:
    rows = []
    for proc, fd, path in opens:
        if deleted:
            f = next(d for d in state["deleted_files"] if d["pid"] == proc["pid"]
                     and d["path"] == path)
            rows.append([proc["comm"][:9], str(proc["pid"]), proc["user"][:8], fd, "REG",
                         "259,1", str(f["size"]), "0", str(1_000_000 + f["fd"]),
                         f"{path} (deleted)"])
        else:
            rows.append([proc["comm"][:9], str(proc["pid"]), proc["user"][:8], fd, "CHR",
                         _rdev(path), "", "", str(400 + len(path)), path])
    return rows


def lsof_table(rows: list[list[str]], nlink: bool) -> str:
    head = list(LSOF_HEAD) if nlink else [h for h in LSOF_HEAD if h != "NLINK"]
    body = rows if nlink else [r[:7] + r[8:] for r in rows]
    widths = [max(len(r[i]) for r in [head, *body]) for i in range(len(head))]
    left = {0, 2, len(head) - 1}
    lines = [" ".join(c.ljust(w) if i in left else c.rjust(w)
                      for i, (c, w) in enumerate(zip(r, widths, strict=True))).rstrip()
             for r in [head, *body]]
    return "".join(line + "\n" for line in lines)


def _deleted_opens(state: State) -> list[Open]:
    out = []
    for d in state["deleted_files"]:
        proc = engine.find_process(state, d["pid"])
        if proc is not None:
            out.append((proc, f"{d['fd']}{d['mode']}", d["path"]))
    return out


def _file_opens(state: State) -> list[Open]:
    """Scenario ``files`` with ``open_by``: a live process holds them (fd 3, read)."""
    out = []
    for f in state.get("files") or []:
        proc = engine.find_process(state, f["open_by"]) if f.get("open_by") else None
        if proc is not None:
            out.append((proc, "3r", f["path"]))
    return out


WILDCARDS = frozenset("*?[")


def _matches(path: str, patterns: list[str]) -> bool:
    if not any(WILDCARDS & set(p) for p in patterns):
        return path in patterns  # what fnmatch does without wildcards, minus its ``re``
    import fnmatch

    return any(fnmatch.fnmatchcase(path, p) or path == p for p in patterns)


def main_lsof(argv: list[str], ctx: SimCall) -> int:
    state = ctx.read()
    terse = any(a == "-t" or (a.startswith("-") and "t" in a[1:] and a[1:].isalpha())
                for a in argv)
    pids, paths, deleted = [], [], False
    it = iter(argv)
    for arg in it:
        if arg in ("+L1", "-L1") or arg.startswith("+L"):
            deleted = True
        elif arg == "-p":
            pids += [int(x) for x in next(it, "").split(",") if x.isdigit()]
        elif not arg.startswith(("-", "+")):
            paths.append(arg)
    opens = _deleted_opens(state) if deleted or not paths else []
    if paths:
        opens += [o for o in _file_opens(state) if _matches(o[2], paths)]
        opens += [o for o in device_opens(state) if _matches(o[2], paths)]
        opens += [o for o in _deleted_opens(state) if _matches(o[2], paths)]
        for p in paths:
            if not any(_matches(o[2], [p]) for o in opens):
                ctx.error(f"lsof: status error on {p}: No such file or directory")
    if pids:
        opens = [o for o in opens + device_opens(state) if o[0]["pid"] in pids]
    if not opens:
        return 1
    if terse:
        ctx.out.write("".join(f"{p}\n" for p in dict.fromkeys(o[0]["pid"] for o in opens)))
        return 0
    gone = {d["path"] for d in state["deleted_files"]}
    is_deleted = [o for o in opens if o[1][0].isdigit() and o[2] in gone]
    rows = lsof_rows(state, is_deleted, True) + lsof_rows(
        state, [o for o in opens if o not in is_deleted], False)
    ctx.out.write(lsof_table(rows, nlink=deleted))
    return 0


def main_fuser(argv: list[str], ctx: SimCall) -> int:
    verbose = any(a in ("-v", "--verbose") or (a[:1] == "-" and "v" in a[1:]) for a in argv)
    kill = any(a in ("-k", "--kill") or (a[:1] == "-" and "k" in a[1:] and a[1:] != "v")
               for a in argv)
    signal = next((signal_name(a[1:]) for a in argv if a[:1] == "-" and signal_name(a[1:])), None)
    patterns = [a for a in argv if not a.startswith("-")]
    with ctx.mutate() as state:
        found = _fuser_report(ctx, state, patterns, verbose)
        if kill:
            for pid in sorted({p["pid"] for _, p in found}):
                engine.kill_process(state, pid, signal or "KILL", ctx.now())
    return 0 if found else 1


def _fuser_report(ctx: SimCall, state: State, patterns: list[str],
                  verbose: bool) -> list[tuple[str, dict[str, Any]]]:
    found = []
    if verbose:
        ctx.error(f"{'':21}{'USER':<11} {'PID':>6} ACCESS COMMAND")
    names = [d for d in devices(state) if _matches(d, patterns)]
    for p in patterns:
        if not any(_matches(d, [p]) for d in devices(state)):
            ctx.error(f"Cannot stat file {p}: No such file or directory")
    for name in names:
        holders = [o[0] for o in device_opens(state) if o[2] == name]
        found += [(name, h) for h in holders]
        if verbose:
            for i, h in enumerate(holders):
                label = f"{name}:" if i == 0 else ""
                ctx.error(f"{label:<21}{h['user']:<11} {h['pid']:>6} F...m {h['comm']}")
        elif holders:
            ctx.error(f"{name}:")
            ctx.out.write("".join(f" {h['pid']:>6}" for h in holders))
    if not verbose and found:
        ctx.out.write("\n")
    return found


def main(argv: list[str], ctx: SimCall) -> int:
    return main_lsof(argv, ctx)
