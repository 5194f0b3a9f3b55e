"""``systemctl reboot`` on a simulated host: the smallest reboot that tells apart "came
back" from "still the old boot". A new boot id (in the state, ``journalctl --list-boots``
and, in the sandbox, ``/proc/sys/kernel/random/boot_id``), every process gone but the
kernel's, GPU memory released (a wedged GPU is cleared by the reset a reboot does), and
the units enabled at boot started again (so an enabled inference server takes the GPUs
back, as in the seed story). The sshd keeps running: the host is back at once.
"""

from __future__ import annotations

import uuid
from pathlib import Path

from bot.sim import engine

TYPE_CHECKING = False  # typing costs every sim command ~5 ms (bot.sim.state)
if TYPE_CHECKING:
    from bot.sim.engine import State

BOOT_ID_PATH = "/proc/sys/kernel/random/boot_id"
KERNEL_PIDS = (1, 2)


def reboot(state: State, now: float) -> str:
    """Reboot ``state`` at ``now`` (pure over the dict); returns the new boot id."""
    boot = state["boot"]
    for prev in boot["previous"]:
        prev["index"] -= 1
    boot["previous"].insert(0, {"index": -1, "id": boot["id"], "start": boot["time"],
                                "end": now, "clean": True, "last_lines": []})
    boot.update(id=uuid.uuid4().hex, time=now)
    state["pending"] = []
    state["processes"] = [p for p in state["processes"] if p["pid"] in KERNEL_PIDS]
    for gpu in state["gpus"]:
        gpu["memory_reserved_mib"] = 0
    for unit in state["units"].values():
        unit.update(active_state="inactive", sub_state="dead", main_pid=0, n_restarts=0)
    for name, unit in state["units"].items():
        if str(unit["unit_file_state"]).startswith("enabled") and unit.get("exec_start"):
            engine.start_unit(state, name, now)
    return str(boot["id"])


def write_boot_id(root: str | Path, boot_id: str) -> None:
    """The kernel's boot id file, inside the sandbox root only (never this machine's)."""
    path = Path(root) / BOOT_ID_PATH.lstrip("/")
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        text = str(uuid.UUID(boot_id))  # the kernel's form: dashed, lower case
    except ValueError:
        text = boot_id
    path.write_text(text + "\n")
