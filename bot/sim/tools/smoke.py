"""``python3`` on a simulated host: the health gate's CUDA smoke answered from the scenario
(a sim runs no CUDA), anything else handed to the real interpreter.

The gate sends ``playbooks/smoke/gpu_smoke.py`` on stdin as ``python3 - --incident-bot-smoke
ARGS``; this prints what that script prints on a GPU host (one JSON line per GPU, then the
``done`` line), from ``smoke`` in the scenario: its figures, per-GPU overrides and errors,
or the error line when torch or CUDA is missing.
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False  # typing costs every sim command ~5 ms (bot.sim.state)
if TYPE_CHECKING:
    from typing import Any

    from bot.sim.state import SimCall

MARKER = "--incident-bot-smoke"
REAL = ("/usr/bin/python3", "/usr/local/bin/python3", "/bin/python3")


def _line(record: dict[str, Any]) -> str:
    import json

    return json.dumps({"smoke": 1, **record}, sort_keys=True)


def main(argv: list[str], ctx: SimCall) -> int:
    if argv[:2] != ["-", MARKER]:
        real = next((p for p in REAL if os.path.exists(p)), None)
        if real is None:
            ctx.error("bash: line 1: python3: command not found")
            return 127
        os.execv(real, ["python3", *argv])
    sys.stdin.read()  # the script itself: read, as python would
    state = ctx.read()
    smoke = state["smoke"]
    if not smoke["torch"]:
        ctx.print(_line({"error": "torch is not importable here: No module named 'torch'"}))
        return 3
    if not smoke["cuda"]:
        ctx.print(_line({"error": "torch sees no CUDA device (torch.cuda.is_available() is False)",
                         "torch": "2.4.0"}))
        return 3
    failed = 0
    gpus = [g for g in state["gpus"] if g.get("visible", True) and not g.get("lost")]
    for g in gpus:
        over = smoke["gpus"].get(str(g["index"])) or {}
        record = {"gpu": g["index"], "device": f"cuda:{g['index']}", "name": g["name"],
                  "uuid": g["uuid"], "memory_gib": round(g["memory_total_mib"] / 1024, 1),
                  "matmul_tflops": over.get("matmul_tflops") or smoke["matmul_tflops"],
                  "mem_gbps": over.get("mem_gbps") or smoke["mem_gbps"],
                  "h2d_gbps": over.get("h2d_gbps") or smoke["h2d_gbps"],
                  "mem_checked_gib": round(g["memory_total_mib"] * 0.8 / 1024, 2),
                  "errors": list(over.get("errors") or []), "seconds": 4.2}
        failed += bool(record["errors"])
        ctx.print(_line(record))
    ctx.print(_line({"done": True, "gpus": len(gpus), "failed": failed, "torch": "2.4.0",
                     "cuda": "12.4"}))
    return 1 if failed else 0
