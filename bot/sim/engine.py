"""How a simulated host changes: stopping and starting units, killing processes, systemd
and docker restarts, watchdogs. Pure functions over the state dict and a timestamp;
delayed effects are queued in ``state["pending"]`` and applied by whoever reads next, so
they happen even when the client that asked gave up (like a real systemd job).
"""

from __future__ import annotations

import os

TYPE_CHECKING = False  # typing costs every sim command ~5 ms (bot.sim.state)
if TYPE_CHECKING:
    from typing import Any

    State = dict[str, Any]
    Proc = dict[str, Any]


CLEAN_SIGNALS = {"TERM", "INT", "HUP", "PIPE"}
ENDING_SIGNALS = {"TERM", "KILL", "INT", "QUIT", "ABRT", "HUP", "PIPE", "SEGV", "BUS"}


def gpu_used_mib(state: State, index: int) -> int:
    gpu = state["gpus"][index]
    held = sum(p["gpu_memory_mib"].get(str(index), 0) for p in state["processes"])
    return min(gpu["memory_total_mib"], gpu["memory_reserved_mib"] + held)


def gpu_processes(state: State, index: int, *, listed: bool = False) -> list[tuple[Proc, int]]:
    """The processes holding memory on GPU ``index``; ``listed``: only those nvidia-smi can
    name (not a process in a PID namespace it cannot map)."""
    return [(p, p["gpu_memory_mib"][str(index)]) for p in state["processes"]
            if p["gpu_memory_mib"].get(str(index)) and not (listed and p.get("hidden"))]


def find_process(state: State, pid: int) -> Proc | None:
    return next((p for p in state["processes"] if p["pid"] == pid), None)


def visible_processes(state: State) -> list[Proc]:
    """What the login's tools see: a process in another PID namespace is left out."""
    return [p for p in state["processes"] if not p.get("hidden")]


def visible_process(state: State, pid: int) -> Proc | None:
    proc = find_process(state, pid)
    return None if proc is None or proc.get("hidden") else proc


def unit_processes(state: State, unit: str) -> list[Proc]:
    owner = {"kind": "systemd", "name": unit}
    return [p for p in state["processes"] if p["owner"] == owner]


def normalize_unit(name: str) -> str:
    """``foo`` means ``foo.service``, as systemctl does."""
    known = (".service", ".socket", ".target", ".timer", ".mount", ".scope", ".slice", ".path")
    return name if name.endswith(known) else f"{name}.service"


def schedule(state: State, at: float, op: str, **kw: Any) -> None:
    state["pending"].append({"at": at, "op": op, **kw})
    state["pending"].sort(key=lambda e: e["at"])


def apply_due(state: State, now: float) -> None:
    """Run queued events whose time has come, oldest first."""
    while state["pending"] and state["pending"][0]["at"] <= now:
        event = state["pending"].pop(0)
        at = event["at"]
        if event["op"] == "stop":
            stop_unit(state, event["unit"], at)
        elif event["op"] == "start":
            unit = state["units"].get(event["unit"])
            if unit and ((event.get("restart") and unit["active_state"] == "activating")
                         or not event.get("restart")):
                start_unit(state, event["unit"], at, restart=bool(event.get("restart")))
        elif event["op"] == "container_start":
            start_container(state, event["name"], at)


def _new_pid(state: State) -> int:
    pid = int(state["next_pid"])
    state["next_pid"] = pid + 1
    return pid


def spawn(state: State, template: dict[str, Any], now: float) -> Proc:
    proc = {**template, "pid": _new_pid(state), "start": now,
            "gpu_memory_mib": dict(template.get("gpu_memory_mib", {}))}
    state["processes"].append(proc)
    return proc


def _unit_template(unit: dict[str, Any]) -> dict[str, Any]:
    if unit.get("template"):
        return dict(unit["template"])
    args = unit["exec_start"] or "/bin/true"
    return {"ppid": 1, "user": unit["user"], "args": args,
            "comm": args.split(" ", 1)[0].rsplit("/", 1)[-1][:15], "rss_kib": unit["rss_kib"],
            "vsz_kib": unit["rss_kib"] * 4, "pcpu": 0.0, "pmem": 0.0, "stat": "Sl",
            "gpu_memory_mib": dict(unit["gpu_memory_mib"]),
            "owner": {"kind": "systemd", "name": unit["name"]},
            "hidden": bool(unit.get("processes_hidden"))}


def start_unit(state: State, name: str, now: float, *, restart: bool = False) -> str | None:
    """Start a unit (new main PID, memory re-taken); returns an error text or None."""
    unit = state["units"][name]
    if unit["unit_file_state"] == "masked":
        unit.update(active_state="inactive", sub_state="dead", main_pid=0)
        return "masked"
    if unit["active_state"] == "active":
        return None
    if _guard_blocks(unit):
        unit.update(active_state="failed", sub_state="failed", main_pid=0, result="exit-code")
        return "ExecStartPre"
    proc = spawn(state, _unit_template(unit), now)
    unit.update(active_state="active", sub_state="running", main_pid=proc["pid"],
                active_enter=now)
    if restart:
        unit["n_restarts"] += 1
    return None


GUARD = "/usr/bin/test ! -e "


def _guard_blocks(unit: dict[str, Any]) -> bool:
    """The incident-bot drop-in's ``ExecStartPre=/usr/bin/test ! -e MARKER``.

    The marker is a real file in the host's sandbox root (tools run chrooted there).
    """
    pre = unit.get("exec_start_pre") or ""
    return pre.startswith(GUARD) and os.path.exists(pre[len(GUARD):].strip())


def stop_unit(state: State, name: str, now: float) -> None:
    """End the unit's processes (their GPU memory is freed); watchdogs may start it again."""
    unit = state["units"][name]
    procs = unit_processes(state, name)
    if procs:
        unit["template"] = {k: v for k, v in procs[0].items() if k not in ("pid", "start")}
    state["processes"] = [p for p in state["processes"] if p not in procs]
    state["pending"] = [e for e in state["pending"]
                        if not (e["op"] == "start" and e["unit"] == name and e.get("restart"))]
    if unit["active_state"] != "inactive":
        unit["active_exit"] = now
    unit.update(active_state="inactive", sub_state="dead", main_pid=0)
    for other in state["units"].values():
        if name in other.get("restarts", []) and other["active_state"] == "active":
            schedule(state, now + other["restart_delay_s"], "start", unit=name)


def _restarts(policy: str, signal: str) -> bool:
    if policy == "always":
        return True
    if policy in ("on-failure", "on-abnormal"):
        return signal not in CLEAN_SIGNALS
    return policy == "on-abort" and signal in {"ABRT", "QUIT", "SEGV"}


def kill_process(state: State, pid: int, signal: str, now: float) -> None:
    """Deliver a signal: ending signals remove the process; owners may restart it."""
    proc = find_process(state, pid)
    if proc is None or signal not in ENDING_SIGNALS or pid == 1 or proc["ppid"] in (0, 2):
        return  # init and kernel threads ignore these
    if signal in (proc.get("ignores") or []) and signal != "KILL":
        return  # a handler that swallows it
    state["processes"].remove(proc)
    if proc.get("leaks_gpu_memory"):
        for index, mib in proc["gpu_memory_mib"].items():
            state["gpus"][int(index)]["memory_reserved_mib"] += mib
    owner = proc["owner"]
    if owner["kind"] == "systemd" and owner["name"] in state["units"]:
        _unit_lost_process(state, owner["name"], proc, signal, now)
    elif owner["kind"] == "docker":
        _container_lost_process(state, owner["name"], proc, now)


def _unit_lost_process(state: State, name: str, proc: Proc, signal: str, now: float) -> None:
    unit = state["units"][name]
    if unit["main_pid"] != proc["pid"]:
        return
    unit["template"] = {k: v for k, v in proc.items() if k not in ("pid", "start")}
    if unit["active_state"] == "active" and _restarts(unit["restart"], signal):
        unit.update(active_state="activating", sub_state="auto-restart", main_pid=0)
        schedule(state, now + unit["restart_sec"], "start", unit=name, restart=True)
        return
    failed = signal not in CLEAN_SIGNALS
    unit.update(active_state="failed" if failed else "inactive",
                sub_state="failed" if failed else "dead", main_pid=0)


def find_container(state: State, ref: str) -> dict[str, Any] | None:
    return next((c for c in state["containers"]
                 if ref in (c["name"], c["id"]) or (len(ref) >= 4 and c["id"].startswith(ref))),
                None)


def _container_lost_process(state: State, name: str, proc: Proc, now: float) -> None:
    box = find_container(state, name)
    if box is None:
        return
    box.update(running=False, pid=0, stopped=now,
               template={k: v for k, v in proc.items() if k not in ("pid", "start")})
    if box["restart_policy"] in ("always", "unless-stopped", "on-failure"):
        schedule(state, now + 0.5, "container_start", name=box["name"])


def start_container(state: State, name: str, now: float) -> None:
    box = find_container(state, name)
    if box is None or box["running"]:
        return
    box.update(running=True, started=now)
    template = box.get("template")
    if template:
        box["pid"] = spawn(state, template, now)["pid"]


def stop_container(state: State, name: str, now: float) -> None:
    """``docker stop``: a manual stop is never restarted by the policy."""
    box = find_container(state, name)
    if box is None:
        return
    owner = {"kind": "docker", "name": box["name"]}
    procs = [p for p in state["processes"] if p["owner"] == owner]
    if procs:
        box["template"] = {k: v for k, v in procs[0].items() if k not in ("pid", "start")}
    state["processes"] = [p for p in state["processes"] if p not in procs]
    box.update(running=False, pid=0, stopped=now)
