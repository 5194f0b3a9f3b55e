"""``journalctl``: ``--list-boots``, ``--disk-usage``, ``--vacuum-size`` (frees space on the
filesystem holding the journal), ``-b [-1] [-n N]`` in short format. A previous boot that
ended uncleanly has no shutdown lines at its end, which is what a playbook looks for.
"""

from __future__ import annotations

import time

from bot.sim.tools.disk import DiskUsageError, block_size, human, mount_of

TYPE_CHECKING = False  # typing costs every sim command ~5 ms (bot.sim.state)
if TYPE_CHECKING:
    from typing import Any

    from bot.sim.state import SimCall, State

CLEAN_END = ["systemd[1]: Reached target shutdown.target - System Shutdown.",
             "systemd[1]: Reached target final.target - Late Shutdown Services.",
             "systemd[1]: Finished systemd-poweroff.service - System Power Off.",
             "systemd[1]: Shutting down.",
             "systemd-journald[312]: Journal stopped"]
MIN_JOURNAL = 16 * 1024 * 1024


def _stamp(epoch: float) -> str:
    return time.strftime("%a %Y-%m-%d %H:%M:%S UTC", time.gmtime(epoch))


def list_boots(state: State, now: float) -> str:
    boots = [*reversed(state["boot"]["previous"]),
             {"index": 0, "id": state["boot"]["id"], "start": state["boot"]["time"], "end": now}]
    lines = ["IDX BOOT ID                          FIRST ENTRY                 LAST ENTRY"]
    lines += [f"{b['index']:>3} {b['id']} {_stamp(b['start'])} {_stamp(b['end'])}" for b in boots]
    return "".join(line + "\n" for line in lines)


def boot_lines(state: State, index: int, now: float) -> list[str] | None:
    host = state["host"]
    if index == 0:
        start, texts = state["boot"]["time"], ["kernel: Linux version " + state["kernel"],
                                               *state["journal"]["lines"]]
        end = now
    else:
        boot = next((b for b in state["boot"]["previous"] if b["index"] == index), None)
        if boot is None:
            return None
        start, end = boot["start"], boot["end"]
        texts = ["kernel: Linux version " + state["kernel"], *boot["last_lines"],
                 *(CLEAN_END if boot["clean"] else [])]
    # first line at boot, the rest a few seconds apart just before the boot's end
    stamps = [start + 1] + [end - 3 * (len(texts) - 1 - i) for i in range(1, len(texts))]
    return [time.strftime("%b %d %H:%M:%S", time.gmtime(t)) + f" {host} {text}"
            for t, text in zip(stamps, texts, strict=True)]


def _vacuum(ctx: SimCall, target: int) -> None:
    with ctx.mutate() as state:
        journal = state["journal"]
        freed = max(journal["usage"] - max(target, MIN_JOURNAL), 0)
        journal["usage"] -= freed
        fs = mount_of(state["filesystems"], journal["path"])
        if fs is not None:
            fs["used"] = max(fs["used"] - freed, 0)
        for d in list(state["dirs"]):
            if journal["path"].startswith(d.rstrip("/") + "/") or d == journal["path"]:
                state["dirs"][d] = max(state["dirs"][d] - freed, 0)
    ctx.error(f"Vacuuming done, freed {human(freed)} of archived journals from "
              f"{journal['path']}/{state['boot']['id']}.")


def kernel_lines(state: State, unix: bool = False) -> str:
    """``journalctl -k``: the kernel ring buffer of this boot, journald's short format (or
    ``-o short-unix``: epoch seconds with microseconds)."""
    out = []
    for line in state["dmesg"]:
        text = line.split("] ", 1)[1] if line.startswith("[") and "] " in line else line
        secs = line[1:].split("]", 1)[0].strip() if line.startswith("[") else "0"
        when = state["boot"]["time"] + (float(secs) if secs.replace(".", "").isdigit() else 0)
        stamp = f"{when:.6f}" if unix else time.strftime("%b %d %H:%M:%S", time.gmtime(when))
        out.append(f"{stamp} {state['host']} kernel: {text}\n")
    return "".join(out)


def _opts(argv: list[str]) -> dict[str, Any]:
    opts: dict[str, Any] = {"lines": None, "boot": None}
    i = 0
    while i < len(argv):
        arg = argv[i]
        name, eq, value = arg.partition("=")
        if arg in ("-b", "--boot"):
            nxt = argv[i + 1] if i + 1 < len(argv) else ""
            opts["boot"], i = (int(nxt), i + 1) if nxt.lstrip("-").isdigit() else (0, i)
        elif (name == "--boot" and eq) or (arg.startswith("-b") and arg[2:].lstrip("-").isdigit()):
            opts["boot"] = int(value if eq else arg[2:])
        elif arg in ("-n", "--lines"):
            opts["lines"], i = int(argv[i + 1]), i + 1
        elif name == "--lines" or (arg.startswith("-n") and arg[2:].isdigit()):
            opts["lines"] = int(value if eq else arg[2:])
        elif name == "--vacuum-size":
            opts["vacuum"] = value
        elif arg in ("--list-boots", "--disk-usage"):
            opts[arg[2:]] = True
        elif arg in ("-k", "--dmesg"):
            opts["kernel"] = True
        elif arg in ("-o", "--output"):
            opts["output"], i = argv[i + 1], i + 1
        elif name == "--output":
            opts["output"] = value
        elif arg.startswith("-") and arg not in ("--no-pager", "-q", "--quiet", "-a", "-e",
                                                 "--utc", "-x"):
            opts.setdefault("ignored", []).append(arg)
        i += 1
    return opts


def main(argv: list[str], ctx: SimCall) -> int:
    try:
        opts = _opts(argv)
    except (ValueError, IndexError):
        ctx.error("journalctl: option requires an argument")
        return 1
    state = ctx.read()
    if opts.get("list-boots"):
        ctx.out.write(list_boots(state, ctx.now()))
    elif opts.get("disk-usage"):
        ctx.print(f"Archived and active journals take up {human(state['journal']['usage'])} "
                  "in the file system.")
    elif opts.get("kernel"):
        ctx.out.write(kernel_lines(state, opts.get("output") == "short-unix"))
    elif "vacuum" in opts:
        try:
            _vacuum(ctx, block_size(opts["vacuum"]))
        except DiskUsageError:
            ctx.error(f"Failed to parse vacuum size: {opts['vacuum']}")
            return 1
    else:
        lines = boot_lines(state, opts["boot"] or 0, ctx.now())
        if lines is None:
            ctx.error(f"Data from the specified boot ({opts['boot']}) is not available: "
                      "No such boot ID in journal")
            return 1
        n = opts["lines"]
        ctx.out.write("".join(line + "\n" for line in (lines[-n:] if n else lines)))
    return 0
