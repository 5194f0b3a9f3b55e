"""The ``bin/`` directory of a sim host: one tiny ``#!/bin/sh`` shim per fake tool, the
ForceCommand wrapper, and ``simrc`` (read by bash through ``BASH_ENV``) which disables
bash's builtin ``kill`` so the shim answers: a sim must never signal a real PID.
"""

from __future__ import annotations

import shlex
from collections.abc import Iterable
from pathlib import Path

from bot.sim.run import SESSION, STUB, TOOLS, python_entry

# `sh -c CMD` (the SSH pool's wrapper) must not reach dash, whose builtin ``kill`` would
# signal real PIDs on this machine: on a sim host ``sh`` is bash, which reads ``simrc``.
SH_SHIM = "#!/bin/sh\nexec /bin/bash \"$@\"\n"

SIMRC = """# sourced by every non-interactive bash on this simulated host (BASH_ENV)
enable -n kill
"""


def _shim(workdir: Path, *tool: str) -> str:
    """One bare interpreter per command (``bot.sim.run.python_entry``)."""
    argv = [*python_entry("bot.sim.run"), str(workdir), *tool]
    return f"#!/bin/sh\nexec {shlex.join(argv)} \"$@\"\n"


def write_shims(workdir: Path, env: dict[str, str] | None = None,
                stubs: Iterable[str] = ()) -> Path:
    """The tools' shims, and one per program the scenario stubs (``commands:``)."""
    bindir = workdir / "bin"
    bindir.mkdir(parents=True, exist_ok=True)
    for tool in [*TOOLS, SESSION]:
        path = bindir / ("sim-session" if tool == SESSION else tool)
        path.write_text(_shim(workdir, tool))
        path.chmod(0o755)
    for program in sorted(set(stubs)):
        (bindir / program).write_text(_shim(workdir, STUB, program))
        (bindir / program).chmod(0o755)
    for name in ("sh", "dash"):
        (bindir / name).write_text(SH_SHIM)
        (bindir / name).chmod(0o755)
    exports = "".join(f"export {name}={shlex.quote(value)}\n"
                      for name, value in sorted((env or {}).items()) if name.isidentifier())
    (bindir / "simrc").write_text(SIMRC + exports)
    return bindir
