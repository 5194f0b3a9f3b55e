"""The mutating ``systemctl`` verbs. Each takes the state lock only to change state; a stop
with ``stop_delay_s`` queues the stop, releases the lock and blocks until it is due, so
the stop still lands if the client gives up (as a systemd job would).
"""

from __future__ import annotations

from bot.sim import engine
from bot.sim.tools.systemd_fmt import Fail

TYPE_CHECKING = False  # typing costs every sim command ~5 ms (bot.sim.state)
if TYPE_CHECKING:
    from collections.abc import Iterator
    from typing import Any

    from bot.sim.state import SimCall, State

WANTS = "/etc/systemd/system/{target}.wants/{name}"


def act(ctx: SimCall, verb: str, args: list[str], opts: dict[str, Any]) -> int:
    if verb == "daemon-reload":
        from bot.sim.tools.dropins import daemon_reload

        return daemon_reload(ctx)
    if verb == "reboot":
        return _reboot(ctx)
    if verb == "reset-failed" and not args:
        return _reset_failed(ctx, [])
    handler = HANDLERS.get(verb)
    if handler is None:
        raise Fail(f"Unknown command verb '{verb}'.")
    if not args:
        raise Fail("Too few arguments.")
    names = [engine.normalize_unit(a) for a in args]
    _refused(ctx.read(), verb, names)
    return handler(ctx, names, opts)


def _refused(state: State, verb: str, names: list[str]) -> None:
    """A scenario's ``fail_verbs``: polkit or a read-only /etc says no to this verb."""
    for name in names:
        unit = state["units"].get(name)
        if unit is not None and verb in (unit.get("fail_verbs") or []):
            raise Fail(f"Failed to {verb} unit: Access denied", 1)


def _stop(ctx: SimCall, names: list[str], opts: dict[str, Any]) -> int:
    wait_until = 0.0
    with ctx.mutate() as state:
        for name in names:
            unit = state["units"].get(name)
            if unit is None:
                raise Fail(f"Failed to stop {name}: Unit {name} not loaded.", 5)
            wait_until = max(wait_until, _begin_stop(state, unit, ctx.now()))
    while ctx.now() < wait_until:
        ctx.sleep(min(0.05, wait_until - ctx.now()))
    ctx.read()  # applies the queued stop
    return 0


def _begin_stop(state: State, unit: dict[str, Any], now: float) -> float:
    """Stop now, or queue it ``stop_delay_s`` ahead; returns when the caller may return."""
    pending = [e["at"] for e in state["pending"] if e["op"] == "stop" and e["unit"] == unit["name"]]
    if pending:
        return min(pending)
    if unit["active_state"] in ("inactive", "failed") or unit["stop_delay_s"] <= 0:
        engine.stop_unit(state, unit["name"], now)
        return now
    due = now + unit["stop_delay_s"]
    unit.update(active_state="deactivating", sub_state="stop-sigterm")
    engine.schedule(state, due, "stop", unit=unit["name"])
    return due


def _start(ctx: SimCall, names: list[str], opts: dict[str, Any], verb: str = "start") -> int:
    with ctx.mutate() as state:
        for name in names:
            unit = state["units"].get(name)
            if unit is None:
                raise Fail(f"Failed to {verb} {name}: Unit {name} not found.", 5)
            if unit["unit_file_state"] == "masked":
                raise Fail(f"Failed to {verb} {name}: Unit {name} is masked.", 1)
            engine.start_unit(state, name, ctx.now())
    return 0


def _restart(ctx: SimCall, names: list[str], opts: dict[str, Any]) -> int:
    with ctx.mutate() as state:
        for name in names:
            unit = state["units"].get(name)
            if unit is not None and unit["unit_file_state"] == "masked":
                raise Fail(f"Failed to restart {name}: Unit {name} is masked.", 1)
    _stop(ctx, names, opts)
    return _start(ctx, names, opts, "restart")


def _file_state(state: State, name: str, verb: str) -> dict[str, Any]:
    unit = state["units"].get(name)
    if unit is None:
        raise Fail(f"Failed to {verb} unit: Unit file {name} does not exist.")
    return unit


def _unit_files(state: State, names: list[str], verb: str) -> Iterator[tuple[str, dict[str, Any]]]:
    """Each named unit's state; a name with no unit file fails as systemctl does."""
    for name in names:
        yield name, _file_state(state, name, verb)


def _enable(ctx: SimCall, names: list[str], opts: dict[str, Any]) -> int:
    with ctx.mutate() as state:
        for name, unit in _unit_files(state, names, "enable"):
            if unit["unit_file_state"] == "masked":
                raise Fail(f"Failed to enable unit: Unit file /etc/systemd/system/{name} is "
                           "masked.")
            if unit["unit_file_state"] == "disabled" and unit["wanted_by"]:
                link = WANTS.format(target=unit["wanted_by"], name=name)
                ctx.error(f"Created symlink {link} → {unit['fragment_path']}.")
                unit["unit_file_state"] = "enabled"
    return _start(ctx, names, opts) if opts.get("now") else 0


def _disable(ctx: SimCall, names: list[str], opts: dict[str, Any]) -> int:
    with ctx.mutate() as state:
        for name, unit in _unit_files(state, names, "disable"):
            if unit["unit_file_state"] == "enabled":
                link = WANTS.format(target=unit["wanted_by"] or "multi-user.target", name=name)
                ctx.error(f'Removed "{link}".')
                unit["unit_file_state"] = "disabled"
    return _stop(ctx, names, opts) if opts.get("now") else 0


def _mask(ctx: SimCall, names: list[str], opts: dict[str, Any]) -> int:
    with ctx.mutate() as state:
        for name in names:
            path = f"/etc/systemd/system/{name}"
            unit = state["units"].get(name)
            if unit is not None and unit["fragment_path"] == path and opts.get("force"):
                ctx.error(f'Removed "{path}".')  # the unit's own file is gone for good
                unit["file_lost"] = True
            elif unit is not None and unit["fragment_path"] == path:
                # real systemd cannot mask a unit whose own file lives in /etc
                raise Fail(f"Failed to mask unit: File {path} already exists.")
            if unit is None or unit["unit_file_state"] == "masked":
                continue
            ctx.error(f"Created symlink {path} → /dev/null.")
            unit.update(unmasked_state=unit["unit_file_state"], unit_file_state="masked",
                        load_state="masked")
    return _stop(ctx, names, opts) if opts.get("now") else 0


def _unmask(ctx: SimCall, names: list[str], opts: dict[str, Any]) -> int:
    with ctx.mutate() as state:
        for name in names:
            unit = state["units"].get(name)
            if unit is None or unit["unit_file_state"] != "masked":
                continue
            ctx.error(f'Removed "/etc/systemd/system/{name}".')
            unit.update(unit_file_state=unit.pop("unmasked_state", "disabled"),
                        load_state="not-found" if unit.get("file_lost") else "loaded")
    return 0


def _kill(ctx: SimCall, names: list[str], opts: dict[str, Any]) -> int:
    signal = str(opts.get("signal", "TERM")).upper().removeprefix("SIG")
    with ctx.mutate() as state:
        for name in names:
            unit = state["units"].get(name)
            if unit is None:
                raise Fail(f"Failed to kill unit {name}: Unit {name} not loaded.", 5)
            for proc in engine.unit_processes(state, name):
                engine.kill_process(state, proc["pid"], signal, ctx.now())
    return 0


def _reset_failed(ctx: SimCall, names: list[str], opts: dict[str, Any] | None = None) -> int:
    with ctx.mutate() as state:
        for unit in state["units"].values():
            if (not names or unit["name"] in names) and unit["active_state"] == "failed":
                unit.update(active_state="inactive", sub_state="dead")
    return 0


def _reboot(ctx: SimCall) -> int:
    """The host reboots at once (``bot.sim.reboot``); in the sandbox its boot id file too."""
    from bot.sim import reboot, sandbox

    with ctx.mutate() as state:
        boot_id = reboot.reboot(state, ctx.now())
    if sandbox.root_of(ctx.workdir) is not None:  # this session runs chrooted in it
        reboot.write_boot_id("/", boot_id)
    return 0


HANDLERS = {"stop": _stop, "start": _start, "restart": _restart, "enable": _enable,
            "disable": _disable, "mask": _mask, "unmask": _unmask, "kill": _kill,
            "reset-failed": _reset_failed}
