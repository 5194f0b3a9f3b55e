"""``/ir stats``: the response numbers come from the audit trail of real stored incidents."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from redis import Redis

from bot.chat.slash import Stats, run
from bot.flow.assembly import _stats_report
from bot.flow.slash_handlers import FlowSlashHandlers
from tests.helpers.seed_postmortem import T0, write_seed_incident


def test_stats_per_kind_and_host_from_the_seed_story(redis: Redis) -> None:
    write_seed_incident(redis)
    nothing: Any = None
    no_slurm: Any = SimpleNamespace(drained=None)
    report = _stats_report(redis, lambda: T0 + 86400)
    handlers = FlowSlashHandlers(nothing, (), nothing, nothing, nothing, nothing,
                                 slurm=no_slurm, stats=report)
    text = run(Stats(7 * 86400), handlers, "UALICE").text
    lines = text.splitlines()
    assert lines[0] == "*Incidents opened in the last 7 d*"
    kind = next(line for line in lines if line.startswith("*vm_restart*"))
    assert "1 incident ·" in kind and "MTTA 1 min" in kind and "one click 100" in kind
    assert any(line.startswith("*gpu-01*") for line in lines)
    assert "No incidents were opened" in run(Stats(3600), handlers, "UALICE").text
