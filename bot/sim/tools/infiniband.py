"""``ibstat`` (infiniband-diags) from the scenario's ``infiniband`` ports, and the sysfs tree
the kernel keeps for them (``/sys/class/infiniband/CA/ports/N/{state,phys_state,rate,
counters/...}``), written into the host's overlay root at start (``bot.sim.sandbox``). A host
without ports has no ``ibstat`` (command not found, as without the package).
"""

from __future__ import annotations

import os

TYPE_CHECKING = False  # typing costs every sim command ~5 ms (bot.sim.state)
if TYPE_CHECKING:
    from typing import Any

    from bot.sim.state import SimCall

# sysfs spells the states as "N: WORD" (Documentation/ABI/stable/sysfs-class-infiniband)
SYSFS_STATE = {"Down": "1: DOWN", "Initializing": "2: INIT", "Armed": "3: ARMED",
               "Active": "4: ACTIVE"}
SYSFS_PHYS = {"Sleep": "1: Sleep", "Polling": "2: Polling", "Disabled": "3: Disabled",
              "LinkUp": "5: LinkUp", "LinkErrorRecovery": "6: LinkErrorRecovery"}
RATE_WORDS = {100: "4X EDR", 200: "4X HDR", 400: "4X NDR", 40: "4X QDR"}


def _guid(ca: str, port: int) -> str:
    """A stable 64-bit GUID per (CA, port) (no hashlib import: every command pays for it)."""
    return "0x" + "".join(f"{ord(c) % 16:x}" for c in (ca * 4)[:14]) + f"{port:02x}"


def main(argv: list[str], ctx: SimCall) -> int:
    ports = ctx.read().get("infiniband") or []
    if not ports:
        ctx.error("bash: line 1: ibstat: command not found")
        return 127
    cas: dict[str, list[dict[str, Any]]] = {}
    for p in ports:
        cas.setdefault(p["ca"], []).append(p)
    for ca, its in cas.items():
        guid = _guid(ca, 0)
        ctx.print(f"CA '{ca}'")
        ctx.print("\tCA type: MT4129")
        ctx.print(f"\tNumber of ports: {len(its)}")
        ctx.print("\tFirmware version: 28.40.1000")
        ctx.print("\tHardware version: 0")
        ctx.print(f"\tNode GUID: {guid}")
        ctx.print(f"\tSystem image GUID: {guid}")
        for p in its:
            ctx.print(f"\tPort {p['port']}:")
            ctx.print(f"\t\tState: {p['state']}")
            ctx.print(f"\t\tPhysical state: {p['phys_state']}")
            ctx.print(f"\t\tRate: {p['rate']}")
            ctx.print(f"\t\tBase lid: {'48' if p['state'] == 'Active' else '65535'}")
            ctx.print("\t\tLMC: 0")
            ctx.print(f"\t\tSM lid: {'48' if p['state'] == 'Active' else '0'}")
            ctx.print("\t\tCapability mask: 0xa751e84a")
            ctx.print(f"\t\tPort GUID: {_guid(ca, p['port'])}")
            ctx.print(f"\t\tLink layer: {p['link_layer']}")
    return 0


def write_sysfs(root: str, ports: list[dict[str, Any]]) -> None:
    """The ports' sysfs files under the overlay ``root`` (never the real /sys)."""
    for p in ports:
        base = os.path.join(root, "sys", "class", "infiniband", p["ca"], "ports", str(p["port"]))
        os.makedirs(os.path.join(base, "counters"), exist_ok=True)
        rate = f"{p['rate']} Gb/sec ({RATE_WORDS.get(int(p['rate']), '4X')})"
        files = {"state": SYSFS_STATE[p["state"]], "phys_state": SYSFS_PHYS[p["phys_state"]],
                 "rate": rate, "link_layer": p["link_layer"],
                 "counters/link_downed": str(p["link_downed"]),
                 "counters/symbol_error": str(p["symbol_error"])}
        for name, text in files.items():
            with open(os.path.join(base, name), "w", encoding="utf-8") as fh:
                fh.write(text + "\n")
