"""``df`` and ``du`` (GNU coreutils 9.1): column widths, headers and rounding as coreutils
prints them (sizes rounded up, ``-h`` in powers of 1024 with one decimal below 10).
"""

from __future__ import annotations

import math

TYPE_CHECKING = False  # typing costs every sim command ~5 ms (bot.sim.state)
if TYPE_CHECKING:
    from typing import Any

    from bot.sim.state import SimCall

    Fs = dict[str, Any]


# field -> (header, min width, left-aligned)
DF_FIELDS: dict[str, tuple[str, int, bool]] = {
    "source": ("Filesystem", 14, True), "fstype": ("Type", 4, True),
    "itotal": ("Inodes", 5, False), "iused": ("IUsed", 5, False),
    "iavail": ("IFree", 5, False), "ipcent": ("IUse%", 4, False),
    "size": ("1K-blocks", 5, False), "used": ("Used", 5, False),
    "avail": ("Avail", 5, False), "pcent": ("Use%", 4, False),
    "file": ("File", 4, True), "target": ("Mounted on", 0, True),
}


def human(n: float) -> str:
    """coreutils ``-h``: ceiling, 1024 steps, one decimal when below 10."""
    if n < 1024:
        return str(math.ceil(n))
    for unit in "KMGTPE":
        n /= 1024
        if n < 1024 or unit == "E":
            if n < 10:
                return f"{math.ceil(n * 10) / 10:.1f}{unit}" if math.ceil(n * 10) < 100 \
                    else f"{math.ceil(n)}{unit}"
            return f"{math.ceil(n)}{unit}"
    return str(n)  # pragma: no cover


def pcent(used: int, avail: int) -> str:
    total = used + avail
    return "-" if total == 0 else f"{math.ceil(used * 100 / total)}%"


def avail_bytes(fs: Fs) -> int:
    reserved = int(fs["size"] * fs["reserved_pct"] / 100)
    return max(fs["size"] - fs["used"] - reserved, 0)


def _blocks(n: int, block: int | None) -> str:
    return human(n) if block is None else str(math.ceil(n / block))


def df_values(fs: Fs, block: int | None, path: str) -> dict[str, str]:
    avail = avail_bytes(fs)
    ifree = fs["inodes"] - fs["inodes_used"]
    inodes = (lambda n: human(n).rstrip("B")) if block is None else str
    return {
        "source": fs["device"], "fstype": fs["type"], "size": _blocks(fs["size"], block),
        "used": _blocks(fs["used"], block), "avail": _blocks(avail, block),
        "pcent": pcent(fs["used"], avail), "itotal": inodes(fs["inodes"]),
        "iused": inodes(fs["inodes_used"]), "iavail": inodes(ifree),
        "ipcent": pcent(fs["inodes_used"], ifree), "target": fs["mount"], "file": path,
    }


def df_table(rows: list[dict[str, str]], fields: list[str], headers: dict[str, str]) -> str:
    table = [[headers.get(f, DF_FIELDS[f][0]) for f in fields]]
    table += [[r[f] for f in fields] for r in rows]
    widths = [max(DF_FIELDS[f][1], *(len(row[i]) for row in table)) for i, f in enumerate(fields)]
    out = []
    for row in table:
        cells = [(c.ljust(w) if DF_FIELDS[f][2] else c.rjust(w)) if i < len(fields) - 1 or
                 not DF_FIELDS[f][2] else c for i, (c, w, f) in enumerate(zip(row, widths, fields,
                                                                                strict=True))]
        out.append(" ".join(cells).rstrip())
    return "".join(line + "\n" for line in out)


def mount_of(filesystems: list[Fs], path: str) -> Fs | None:
    best = None
    for fs in filesystems:
        m = fs["mount"].rstrip("/") + "/"
        if (path.rstrip("/") + "/").startswith(m) and (best is None or
                                                       len(fs["mount"]) > len(best["mount"])):
            best = fs
    return best


class DiskUsageError(Exception):
    pass


BLOCK_SUFFIX = {"": 1, "K": 1024, "M": 1024**2, "G": 1024**3, "T": 1024**4}


def block_size(text: str) -> int:
    text = text.upper().removesuffix("B")
    digits = text.rstrip("KMGT")
    suffix = text[len(digits):]
    if suffix not in BLOCK_SUFFIX or (digits and not digits.isdigit()):
        raise DiskUsageError(f"invalid block size '{text}'")
    return int(digits or 1) * BLOCK_SUFFIX[suffix]


def _short(arg: str, argv: list[str], i: int, opts: dict[str, Any], valued: str) -> int:
    """A cluster like ``-hT`` or ``-B1``; letters in ``valued`` take the rest or next arg."""
    for j, ch in enumerate(arg[1:]):
        if ch in valued:
            rest = arg[j + 2:]
            value = rest or (argv[i + 1] if i + 1 < len(argv) else "")
            opts.setdefault(ch, []).append(value)
            return i + (1 if rest else 2)
        opts[ch] = True
    return i + 1


LONG = {"human-readable": "h", "portability": "P", "inodes": "i", "print-type": "T",
        "exclude-type": "x", "type": "t", "block-size": "B", "max-depth": "d", "summarize": "s",
        "one-file-system": "x", "bytes": "b", "total": "c", "all": "a", "local": "l",
        "apparent-size": "A"}


def parse(argv: list[str], valued: str) -> tuple[dict[str, Any], list[str]]:
    opts: dict[str, Any] = {}
    paths: list[str] = []
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg.startswith("--"):
            name, eq, value = arg[2:].partition("=")
            if name == "output":
                opts["output"] = value if eq else ""
            elif name in LONG and LONG[name] in valued:
                opts.setdefault(LONG[name], []).append(value)
            elif name in LONG:
                opts[LONG[name]] = True
            else:
                raise DiskUsageError(f"unrecognized option '{arg}'")
            i += 1
        elif arg.startswith("-") and len(arg) > 1:
            i = _short(arg, argv, i, opts, valued)
        else:
            paths.append(arg)
            i += 1
    return opts, paths


def _df_fields(opts: dict[str, Any]) -> list[str]:
    if "output" in opts:
        fields = [f for f in opts["output"].split(",") if f] or list(DF_FIELDS)
        for f in fields:
            if f not in DF_FIELDS:
                raise DiskUsageError(f"option --output: field '{f}' unknown")
        return fields
    base = (["source", "itotal", "iused", "iavail", "ipcent", "target"] if opts.get("i")
            else ["source", "size", "used", "avail", "pcent", "target"])
    return [*base[:1], "fstype", *base[1:]] if opts.get("T") else base


def _df_block(opts: dict[str, Any]) -> tuple[int | None, str]:
    if opts.get("h") or opts.get("H"):
        return None, "Size"
    block = block_size(opts["B"][-1]) if opts.get("B") else (1024**2 if opts.get("m") else 1024)
    if opts.get("P") and block == 1024:
        return block, "1024-blocks"
    units = {1024**k: f"1{u}" for k, u in enumerate("KMGT", start=1)}
    return block, f"{units.get(block, f'{block}B')}-blocks"


def release_deleted(state: dict[str, Any]) -> None:
    """Scenario ``files`` deleted in the sandbox root give their bytes back to their mount.

    Tools run chrooted in the host's sandbox (``bot.sim.sandbox``), so the check is a
    plain ``lexists`` on the simulated path.
    """
    import os

    for f in state.get("files") or []:
        fs = mount_of(state["filesystems"], f["path"])
        if fs is not None and not os.path.lexists(f["path"]):
            fs["used"] = max(fs["used"] - int(f["size"]), 0)


def main_df(argv: list[str], ctx: SimCall) -> int:
    try:
        opts, paths = parse(argv, "xtB")
        fields = _df_fields(opts)
        block, size_header = _df_block(opts)
    except DiskUsageError as exc:
        ctx.error(f"df: {exc}\nTry 'df --help' for more information.")
        return 1
    state = ctx.read()
    release_deleted(state)
    excluded, only = set(opts.get("x", [])), set(opts.get("t", []))
    rows, code = [], 0
    wanted: list[str | None] = list(paths) or [None]
    for path in wanted:
        if path is None:
            chosen = list(state["filesystems"])
        else:
            fs = mount_of(state["filesystems"], path)
            if fs is None:
                ctx.error(f"df: {path}: No such file or directory")
                code = 1
                continue
            chosen = [fs]
        rows += [df_values(f, block, path or "-") for f in chosen
                 if f["type"] not in excluded and (not only or f["type"] in only)]
    headers = {"size": size_header, "pcent": "Capacity" if opts.get("P") else "Use%",
               "avail": "Available" if opts.get("P") else "Avail"}
    if rows or code == 0:
        ctx.out.write(df_table(rows, fields, headers))
    return code


def _children(dirs: dict[str, int], path: str) -> list[str]:
    prefix = path.rstrip("/") + "/"
    return sorted(d for d in dirs if d.startswith(prefix) and "/" not in d[len(prefix):])


def _du_size(state: dict[str, Any], path: str) -> int | None:
    if path in state["dirs"]:
        return int(state["dirs"][path])
    fs = next((f for f in state["filesystems"] if f["mount"] == path), None)
    return int(fs["used"]) if fs else None


def _du_walk(state: dict[str, Any], path: str, depth: int, max_depth: int | None,
             one_fs: bool) -> list[tuple[int, str]]:
    out: list[tuple[int, str]] = []
    mounts = {f["mount"] for f in state["filesystems"]}
    for child in _children(state["dirs"], path):
        if one_fs and child in mounts:
            continue
        out += _du_walk(state, child, depth + 1, max_depth, one_fs)
    size = _du_size(state, path) or 4096
    if max_depth is None or depth <= max_depth:
        out.append((size, path))
    return out


def main_du(argv: list[str], ctx: SimCall) -> int:
    try:
        opts, paths = parse(argv, "dB")
        max_depth = 0 if opts.get("s") else (int(opts["d"][-1]) if opts.get("d") else None)
        block = None if opts.get("h") else (block_size(opts["B"][-1]) if opts.get("B") else
                                             (1 if opts.get("b") else 1024))
    except (DiskUsageError, ValueError) as exc:
        ctx.error(f"du: {exc}\nTry 'du --help' for more information.")
        return 1
    state = ctx.read()
    code = 0
    for raw in paths or ["."]:
        path = raw.rstrip("/") or "/"
        if _du_size(state, path) is None:
            ctx.error(f"du: cannot access '{raw}': No such file or directory")
            code = 1
            continue
        for size, p in _du_walk(state, path, 0, max_depth, bool(opts.get("x"))):
            ctx.print(f"{_blocks(size, block)}\t{p}")
    return code


def main(argv: list[str], ctx: SimCall) -> int:
    return main_df(argv, ctx)
