"""``dcgmi diag -r N -j``: DCGM 4.x's JSON (NVIDIA/DCGM ``dcgm_diag_schema.json``) from the
scenario's ``dcgm``: level 1 runs the deployment checks (``software``), level 2 adds
``memory`` and ``pcie``, level 3 ``targeted_stress``; a test in ``failures`` at or below the
level fails on its GPUs with its warning. Not installed: command not found (exit 127). The
answer is immediate: a real level 2 takes about two minutes (docs/health-gate.md).
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing costs every sim command ~5 ms (bot.sim.state)
if TYPE_CHECKING:
    from typing import Any

    from bot.sim.state import SimCall

TESTS = {1: [("Deployment", "software")],
         2: [("Hardware", "memory"), ("Integration", "pcie")],
         3: [("Stress", "targeted_stress")]}


def _level(argv: list[str]) -> int | None:
    for i, arg in enumerate(argv):
        if arg in ("-r", "--run") and i + 1 < len(argv):
            return int(argv[i + 1]) if argv[i + 1].isdigit() else None
        if arg.startswith("--run="):
            value = arg.split("=", 1)[1]
            return int(value) if value.isdigit() else None
    return None


def _result(gpu: int, failure: dict[str, Any] | None) -> dict[str, Any]:
    out: dict[str, Any] = {"entity_group": "GPU", "entity_group_id": 1, "entity_id": gpu,
                           "status": "Pass"}
    if failure is not None and gpu in failure["gpus"]:
        out["status"] = "Fail"
        why = failure["warning"] or f"{failure['test']} failed on GPU {gpu}"
        out["warnings"] = [{"error_category": 5, "error_id": 42, "error_severity": 1,
                            "warning": why}]
    return out


def diag(state: dict[str, Any], level: int) -> dict[str, Any]:
    gpus = [g["index"] for g in state["gpus"] if g.get("visible", True) and not g.get("lost")]
    dcgm = state["dcgm"]
    categories: dict[str, list[dict[str, Any]]] = {}
    for n in range(1, level + 1):
        for category, test in TESTS.get(n, []):
            failure = next((f for f in dcgm["failures"] if f["test"] == test
                            and f["level"] <= level), None)
            results = [_result(g, failure) for g in gpus]
            status = "Fail" if any(r["status"] == "Fail" for r in results) else "Pass"
            categories.setdefault(category, []).append(
                {"name": test, "results": results, "test_summary": {"status": status}})
    body: dict[str, Any] = {"test_categories": [{"category": c, "tests": t}
                                                for c, t in categories.items()]}
    if dcgm["runtime_error"]:
        body = {"runtime_error": dcgm["runtime_error"]}
    return {"DCGM Diagnostic": body, "metadata": {"version": dcgm["version"]},
            "entity_groups": [{"entity_group": "GPU", "entity_group_id": 1, "entities": [
                {"entity_id": g, "device_id": "2330"} for g in gpus]}]}


def main(argv: list[str], ctx: SimCall) -> int:
    import json

    state = ctx.read()
    if not state["dcgm"]["installed"]:
        ctx.error("bash: line 1: dcgmi: command not found")
        return 127
    level = _level(argv)
    if argv[:1] != ["diag"] or level is None or not 1 <= level <= 4:
        ctx.print("Usage: dcgmi diag -r <level> [-j]")
        return 2
    doc = diag(state, level)
    if "-j" in argv or "--json" in argv:
        ctx.print(json.dumps(doc, indent=4))
    else:
        ctx.print("Successfully ran diagnostic for group.")
    failed = any(r["status"] == "Fail" for c in doc["DCGM Diagnostic"].get("test_categories", [])
                 for t in c["tests"] for r in t["results"])
    return 226 if failed or state["dcgm"]["runtime_error"] else 0
