"""``/ir stats`` and the digest: the response numbers come from the audit trail of real stored
incidents (the seed story, written through the real stores)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

from redis import Redis

from bot.chat.slash import Stats, run
from bot.config.settings import Settings
from bot.digest.render import render_digest
from bot.flow.assembly import _stats_report
from bot.flow.slash_handlers import FlowSlashHandlers
from bot.schedule.wiring import build_digest_runner
from storage.stores import Stores
from tests.helpers.chat import RecordingChat
from tests.helpers.seed_postmortem import T0, write_seed_incident


def test_stats_per_kind_and_host_from_the_seed_story(redis: Redis, stores: Stores) -> None:
    write_seed_incident(redis)
    nothing: Any = None
    no_slurm: Any = SimpleNamespace(drained=None)
    report = _stats_report(stores.incidents(), stores.audit(), lambda: T0 + 86400)
    handlers = FlowSlashHandlers(nothing, (), nothing, nothing, nothing, nothing, opens=nothing,
                                 slurm=no_slurm, stats=report)
    text = run(Stats(7 * 86400), handlers, "UALICE").text
    lines = text.splitlines()
    assert lines[0] == "*Incidents opened in the last 7 d*"
    kind = next(line for line in lines if line.startswith("*vm_restart*"))
    assert "1 incident ·" in kind and "MTTA 1 min" in kind and "one click 100" in kind
    assert any(line.startswith("*gpu-01*") for line in lines)
    assert "No incidents were opened" in run(Stats(3600), handlers, "UALICE").text


def test_the_digest_gains_the_response_numbers_per_kind(redis: Redis, stores: Stores,
                                                       tmp_path: Path) -> None:
    write_seed_incident(redis)
    settings = Settings.model_validate({"redis_url": "redis://127.0.0.1:1/0",
                                        "chat_backend": "terminal"})
    runner = build_digest_runner(settings, stores, RecordingChat(), tmp_path)
    digest, _ = runner.build(T0 - 3600, T0 + 86400)
    assert [(r.key, r.incidents, r.one_click) for r in digest.response] == [("vm_restart", 1, 1)]
    shown = "\n".join(s.text for s in render_digest(digest).sections)
    assert "*Response*" in shown and "*vm_restart*: 1 incident · MTTA 1 min" in shown
    later, _ = runner.build(T0 + 3600, T0 + 7200)  # nothing opened in that period
    assert later.response == ()
