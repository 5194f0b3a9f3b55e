"""The ``bin/`` directory of a sim host: one tiny ``#!/bin/sh`` shim per fake tool, the
ForceCommand wrapper, and ``simrc`` (read by bash through ``BASH_ENV``) which disables
bash's builtin ``kill`` so the shim answers: a sim must never signal a real PID.
"""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

import bot
from bot.sim.run import SESSION, TOOLS

# `sh -c CMD` (the SSH pool's wrapper) must not reach dash, whose builtin ``kill`` would
# signal real PIDs on this machine: on a sim host ``sh`` is bash, which reads ``simrc``.
SH_SHIM = "#!/bin/sh\nexec /bin/bash \"$@\"\n"

SIMRC = """# sourced by every non-interactive bash on this simulated host (BASH_ENV)
enable -n kill
"""


def _shim(workdir: Path, tool: str) -> str:
    """``python -I -S -X utf8 -c``: no site, no ``runpy`` (``-m`` costs ~10 ms a command),
    no environment variables and no current directory on ``sys.path`` (``-I``)."""
    root = Path(bot.__file__).resolve().parent.parent
    q = shlex.quote
    code = (f"import sys; sys.path.insert(0, {str(root)!r}); from bot.sim.run import main; "
            "sys.exit(main(sys.argv[1:]))")
    return (f"#!/bin/sh\nexec {q(sys.executable)} -I -S -X utf8 -c {q(code)} "
            f"{q(str(workdir))} {tool} \"$@\"\n")


def write_shims(workdir: Path) -> Path:
    bindir = workdir / "bin"
    bindir.mkdir(parents=True, exist_ok=True)
    for tool in [*TOOLS, SESSION]:
        path = bindir / ("sim-session" if tool == SESSION else tool)
        path.write_text(_shim(workdir, tool))
        path.chmod(0o755)
    for name in ("sh", "dash"):
        (bindir / name).write_text(SH_SHIM)
        (bindir / name).chmod(0o755)
    (bindir / "simrc").write_text(SIMRC)
    return bindir
