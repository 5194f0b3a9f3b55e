"""``nvidia-smi --gpu-reset [-i N]`` (alias ``-r``): the driver's messages and exit codes.

A GPU with any process on it, or while anything keeps the device files open (a daemon unit,
or a process such as a containerised dcgm-exporter: ``holds_devices``), cannot be reset
("In use by another client", exit 255);
otherwise its memory left behind by dead processes (``memory_reserved_mib``) is cleared.
"""

from __future__ import annotations

from bot.sim import engine

TYPE_CHECKING = False  # typing costs every sim command ~5 ms (bot.sim.state)
if TYPE_CHECKING:
    from bot.sim.state import SimCall

IN_USE = ("\n1 device is currently being used by one or more other processes (e.g., Fabric "
          "Manager, CUDA application, graphics application such as an X server, or a "
          "monitoring application such as another instance of nvidia-smi). Please first kill "
          "all processes using this device and all compute applications running in the system.")


# Daemons that keep the device files open without showing as compute processes: while
# one runs, the driver refuses the reset with the same "In use by another client".
DEVICE_HOLDERS = ("nvidia-persistenced.service", "dcgm-exporter.service",
                  "nvidia-fabricmanager.service")


def _active(state: dict[str, object], unit: str) -> bool:
    units = state.get("units")
    found = units.get(unit) if isinstance(units, dict) else None
    return isinstance(found, dict) and found.get("active_state") == "active"


def wanted(argv: list[str]) -> bool:
    return "--gpu-reset" in argv or "-r" in argv


def _index(argv: list[str]) -> str | None:
    for i, arg in enumerate(argv):
        if arg in ("-i", "--id") and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith("--id="):
            return arg.split("=", 1)[1]
    return None


def main(argv: list[str], ctx: SimCall) -> int:
    index = _index(argv)
    with ctx.mutate() as state:
        gpus = state["gpus"] if index is None else [
            g for g in state["gpus"] if str(g["index"]) == index]
        if not gpus:
            ctx.print(f"No devices were found matching the given identifier: {index}")
            return 6
        busy = [g for g in gpus if engine.gpu_processes(state, g["index"])]
        if not busy and (any(_active(state, u) for u in DEVICE_HOLDERS)
                         or any(p.get("holds_devices") for p in state["processes"])):
            busy = list(gpus)  # a daemon keeps /dev/nvidia* open: not a compute app
        if busy:
            ctx.print("The following GPUs could not be reset:")
            for g in busy:
                ctx.print(f"  GPU {g['bus_id']}: In use by another client")
            ctx.print(IN_USE)
            return 255
        for g in gpus:
            if g.get("reset_fails"):
                ctx.print(f"Unable to reset GPU {g['bus_id']}: Unknown Error")
                return 255
            g["memory_reserved_mib"] = 0
            ctx.print(f"GPU {g['bus_id']} was successfully reset.")
    return 0
