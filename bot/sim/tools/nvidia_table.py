"""The default ``nvidia-smi`` summary table (driver 535+ layout, 91 columns)."""

from __future__ import annotations

import time

from bot.sim.engine import gpu_processes, gpu_used_mib

TYPE_CHECKING = False  # typing costs every sim command ~5 ms (bot.sim.state)
if TYPE_CHECKING:
    from typing import Any

    from bot.sim.state import State

SEP = "+-----------------------------------------+------------------------+----------------------+"
WIDE = "+" + "-" * 89 + "+"


def _name(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 3] + "..."


def _gpu_rows(state: State, g: dict[str, Any]) -> list[str]:
    used = gpu_used_mib(state, g["index"])
    pm = "On" if g["persistence_mode"] == "Enabled" else "Off"
    fan = "N/A" if g["fan"] == "N/A" else f"{g['fan']}%"
    left1 = f"{g['index']:>4}  {_name(g['name'], 28):<28}{pm:>5}  "
    mid1 = f"{g['bus_id']:>19} {'Off':>3} "
    right1 = f"{g['ecc_errors']:>21} "
    left2 = (f"{fan:>4}{g['temperature_c']:>5}C{g['perf']:>6}"
             f"{round(g['power_draw_w']):>15}W / {round(g['power_limit_w']):>4}W ")
    mid2 = f"{used:>8}MiB / {g['memory_total_mib']:>6}MiB "
    right2 = f"{g['utilization_gpu']:>7}%{g['compute_mode']:>13} "
    return [f"|{left1}|{mid1}|{right1}|", f"|{left2}|{mid2}|{right2}|",
            f"|{'':41}|{'':24}|{'Disabled':>21} |", SEP]


def _proc_line(gpu: str, gi: str, ci: str, pid: str, kind: str, name: str, mem: str) -> str:
    return f"|  {gpu:>3}   {gi:<3}  {ci:<3}  {pid:>12}  {kind:>5}   {name:<36}  {mem:>10} |"


def _processes(state: State, gpus: list[dict[str, Any]]) -> list[str]:
    lines = [WIDE, f"| {'Processes:':<88}|",
             _proc_line("GPU", "GI", "CI", "PID", "Type", "Process name", "GPU Memory"),
             _proc_line("", "ID", "ID", "", "", "", "Usage     "), "|" + "=" * 89 + "|"]
    rows = []
    if state["nvidia"]["sees_pids"]:
        for g in gpus:
            for proc, mib in gpu_processes(state, g["index"], listed=True):
                name = _name(proc["args"].split(" ", 1)[0], 36)
                rows.append(_proc_line(str(g["index"]), "N/A", "N/A", str(proc["pid"]), "C",
                                       name, f"{mib}MiB"))
    lines.extend(rows or [f"|  {'No running processes found':<87}|"])
    lines.append(WIDE)
    return lines


def table(state: State, gpus: list[dict[str, Any]], now: float) -> str:
    nv = state["nvidia"]
    head = [time.strftime("%a %b %d %H:%M:%S %Y", time.gmtime(now)) + "       ", WIDE,
            f"| NVIDIA-SMI {nv['driver_version']:<23}Driver Version: {nv['driver_version']:<15}"
            f"CUDA Version: {nv['cuda_version']:<9}|",
            "|" + SEP[1:-1] + "+",
            "| GPU  Name                 Persistence-M | Bus-Id          Disp.A |"
            " Volatile Uncorr. ECC |",
            "| Fan  Temp   Perf          Pwr:Usage/Cap |           Memory-Usage |"
            " GPU-Util  Compute M. |",
            f"|{'':41}|{'':24}|{'MIG M.':>21} |",
            "|" + "=" * 41 + "+" + "=" * 24 + "+" + "=" * 22 + "|"]
    body = [row for g in gpus for row in _gpu_rows(state, g)]
    return "\n".join([*head, *body, " " * 91, *_processes(state, gpus)]) + "\n"
