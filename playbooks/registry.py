"""Playbook name -> playbook, and ``auto``, which picks one from the host's state.

``auto`` runs three cheap probes (df, one GPU sample, boot time) and then the chosen
playbook in the same session, so its evidence includes why it chose. An nvidia-smi that
errs or hangs picks ``gpu_health`` first: no other playbook can read those GPUs.

Playbooks are registered through the ``incident_bot.playbooks`` entry points, the
built-in ones in ``pyproject.toml`` like a third party's: each entry names a module (or
an object) with ``NAME``, ``DESCRIPTION`` and ``run(session, context) -> Report``. Each
is imported when it is first asked for: a person's ``incident-bot diagnose`` pays for
the playbook it runs, not for all of them.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from bot.core import plugins
from bot.core import strings as S
from bot.domain.findings import ProbeResult, Severity
from playbooks import probes
from playbooks.base import Probe, Report, Session
from playbooks.gpu import QUERY_GPU_COMMAND
from playbooks.parsers import host
from playbooks.parsers.nvidia import GpuSample, parse_query_gpu, rows_of
from playbooks.parsers.refusal import refused
from playbooks.parsers.smi_errors import REFUSALS, parse_smi_errors

AUTO = "auto"


@dataclass(frozen=True)
class Playbook:
    name: str
    description: str
    run: Callable[[Session, Mapping[str, Any]], Report]


class UnknownPlaybook(ValueError):
    def __init__(self, name: str) -> None:
        super().__init__(S.DIAG_UNKNOWN_PLAYBOOK.format(name=name, names=", ".join(names())))
        self.name = name


GROUP = "incident_bot.playbooks"
# name -> the module that defines it (its NAME, DESCRIPTION and run); pyproject.toml
# declares the same entries (a test keeps the two equal)
BUILTIN: dict[str, str] = {name: f"playbooks.{name}" for name in
                           ("vram_idle", "vm_restart", "disk_full", "triage", "gpu_health")}


@functools.cache
def playbooks() -> dict[str, str]:
    """Every registered playbook: name -> "module[:object]" (read once)."""
    found: dict[str, str] = {}
    for name, value in plugins.declared(GROUP, BUILTIN):
        if name == AUTO or (name in found and found[name] != value):
            raise plugins.BadEntry(f"{GROUP}: playbook {name!r} registered twice")
        found[name] = value
    order = list(BUILTIN)  # the built-in ones in their order (help, README), then the rest
    return dict(sorted(found.items(), key=lambda item: (
        order.index(item[0]) if item[0] in order else len(order), item[0])))


def names() -> list[str]:
    return [*playbooks(), AUTO]


def get(name: str) -> Playbook:
    if name == AUTO:
        return Playbook(AUTO, "pick a playbook from the host's state", run_auto)
    if name not in playbooks():
        raise UnknownPlaybook(name)
    found = plugins.load(GROUP, name, playbooks()[name])
    run = getattr(found, "run", None)
    if not callable(run) or getattr(found, "NAME", None) != name:
        raise plugins.BadEntry(f"{GROUP} entry {name!r} must have NAME = {name!r} and run()")
    return Playbook(name, str(getattr(found, "DESCRIPTION", "")), run)


def run_auto(session: Session, context: Mapping[str, Any]) -> Report:
    gpus: Probe[list[GpuSample]] = Probe("gpu_glance", QUERY_GPU_COMMAND,
                                         lambda text: rows_of(parse_query_gpu(text)))
    futures = session.submit_many({"df": probes.df(), "gpus": gpus, "clock": probes.clock()})
    got = session.parsed(futures)
    clock = host.parse_clock("\n".join(got["clock"]))
    trouble = gpu_trouble(futures["gpus"].result()[0])
    name, why = ("gpu_health", trouble) if trouble else \
        choose(got["df"], got["gpus"], clock, session)
    report = get(name).run(session, context)
    report.findings.insert(0, _auto_finding(name, why))
    report.playbook = name
    return report


def gpu_trouble(glance: ProbeResult) -> str:
    """Why nvidia-smi's own answer says the GPUs need gpu_health ("" when it answered, or
    when it was refused or is missing: that says nothing of the GPUs, so the host's other
    troubles still choose; the GPU view reports the refusal either way)."""
    if glance.timed_out:
        return S.GPU_SMI_HUNG.format(secs=round(glance.duration_s, 1))
    errors = [e for e in parse_smi_errors(glance.stdout + "\n" + glance.stderr)
              if e.kind not in REFUSALS]
    if errors:
        return f"nvidia-smi: {errors[0].quote}"[:200]
    failed = glance.exit_status not in (0, None, 127) and not glance.error  # 127: no GPU stack
    if failed and not refused(glance.stdout, glance.stderr, glance.exit_status):
        return f"nvidia-smi exited with status {glance.exit_status}"
    return ""


def choose(space: list[Any], gpus: list[GpuSample], clock: tuple[float, float] | None,
           session: Session) -> tuple[str, str]:
    """Pure choice: full disk, then a recent boot, then idle held GPUs, else triage."""
    from playbooks import disk_full  # its rule says what full is

    opts = session.options
    full = disk_full.full(space, opts)
    if full:
        return disk_full.NAME, f"{full[0].mount} is {full[0].used_pct or 0:.0f}% full"
    if clock and clock[0] - clock[1] <= opts.recent_boot_s:
        return "vm_restart", f"booted {clock[0] - clock[1]:.0f} s ago"
    held = [g for g in gpus if (g.memory_used_mib or 0) > opts.held_mib
            and (g.utilization_pct or 0) <= opts.idle_util_pct]
    if held:
        return "vram_idle", f"{len(held)} GPU(s) hold memory at low utilization"
    return "triage", "no full disk, recent boot or idle GPU memory"


def _auto_finding(name: str, why: str) -> Any:
    from bot.domain.findings import Finding

    return Finding("playbook.auto", Severity.INFO, S.DIAG_AUTO.format(playbook=name, why=why),
                   evidence={"playbook": name, "why": why})
