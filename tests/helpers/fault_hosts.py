"""The simulated fault hosts (every shipped scenario) and the playbook options a real
inventory would give each: its expected GPU count is the scenario's own, visible or not."""

from __future__ import annotations

from bot.sim.scenario import load_scenario, shipped_names
from playbooks import PlaybookOptions

# fast sampling; nvidia-smi's deadline short enough that the hanging host stays quick
FAST = PlaybookOptions(samples=2, sample_interval_s=0.1, command_timeout_s=4.0)


def fault_hosts() -> list[str]:
    """Every shipped scenario: each carries one fault (``healthy`` is the control)."""
    return shipped_names()


def expected_gpus(scenario: str) -> int:
    return sum(g.count for g in load_scenario(scenario).gpus)


def options_for(scenario: str, **kw: object) -> PlaybookOptions:
    from dataclasses import replace

    return replace(FAST, expected_gpus=expected_gpus(scenario) or None, **kw)  # type: ignore[arg-type]
