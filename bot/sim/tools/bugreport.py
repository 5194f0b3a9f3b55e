"""``nvidia-bug-report.sh [--safe-mode] [--output-file FILE]``: writes ``FILE.gz`` (default
``nvidia-bug-report.log.gz``) in the host's overlay root, with the sections a real report
opens with and what the simulated host's tools say, and prints where it went."""

from __future__ import annotations

import os
import time

TYPE_CHECKING = False  # typing costs every sim command ~5 ms (bot.sim.state)
if TYPE_CHECKING:
    from bot.sim.state import SimCall


def main(argv: list[str], ctx: SimCall) -> int:
    import gzip

    out = "nvidia-bug-report.log"
    if "--output-file" in argv:
        i = argv.index("--output-file")
        if i + 1 >= len(argv):
            ctx.error("nvidia-bug-report.sh: --output-file requires a file name")
            return 1
        out = argv[i + 1]
    state = ctx.read()
    path = out if out.endswith(".gz") else out + ".gz"
    lines = [f"Start of NVIDIA bug report log file.  Date: {time.ctime(ctx.now())}",
             f"nvidia-bug-report.sh Version: {state['nvidia']['driver_version']}",
             f"Safe mode: {'yes' if '--safe-mode' in argv else 'no'}",
             *(f"GPU {g['index']}: {g['name']} ({g['bus_id']})" for g in state["gpus"]),
             *state["dmesg"]]
    try:
        with gzip.open(path, "wt", encoding="utf-8") as fh:
            fh.write("\n".join(lines) + "\n")
    except OSError as exc:
        ctx.error(f"nvidia-bug-report.sh: cannot write {path}: {exc.strerror}")
        return 1
    ctx.print(f"\nnvidia-bug-report.sh will now collect information about your system.\n\n"
              f"Complete. The output file is {os.path.abspath(path)}")
    return 0
