"""An action whose replica died mid-way: the reconciler fails it once, never runs it again,
and the incident's one message shows why with Retry (issue 24)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import replace
from functools import partial

from bot.domain.incident_record import Running
from bot.domain.lifecycle import IncidentState
from bot.flow.reconcile import RedriveOutcome, reconcile_once
from bot.sim.sshd import SimHost
from tests.fixtures.bots import (  # noqa: F401 - ``loop`` is a fixture
    ONCALL,
    UNIT,
    Loop,
    buttons,
    loop,
    loop_settings,
)
from tests.helpers.serve_process import dead_owner

S = IncidentState


def test_an_action_whose_owner_died_is_failed_once_and_never_rerun(
        loop: Loop, redis_url: str, sim_factory: Callable[..., SimHost]) -> None:  # noqa: F811
    sim = sim_factory("seed")
    loop.start(loop_settings(redis_url, sim, loop.standin))
    incident_id = loop.open()
    loop.wait_state(incident_id, S.AWAITING_APPROVAL)
    ctx = loop.flow  # what a replica killed while acting leaves behind
    ctx.incidents.transition(incident_id, S.APPROVED, ONCALL, "approved systemd.stop_disable")
    ctx.incidents.transition(incident_id, S.REMEDIATING, ONCALL, "acting", owner=dead_owner())
    running = Running("systemd.stop_disable", ONCALL, time.time())
    ctx.incidents.update(incident_id, lambda i: replace(i, running=running))
    assert ctx.outbox.flush(10)  # the card's evidence reply, held to Slack's pace, is out
    cards = len(loop.standin.calls_of("chat.postMessage"))
    rediagnosed: list[str] = []
    sweep = partial(reconcile_once, ctx.incidents, ctx.audit, ctx.clock,
                    rediagnose=rediagnosed.append, fail_stalled=ctx.act.fail_stalled,
                    publish=ctx.publisher.publish)
    done = sweep()
    assert [(r.incident_id, r.outcome) for r in done] == [(incident_id,
                                                           RedriveOutcome.FAILED_STALLED)]
    assert loop.state(incident_id) is S.ACTION_FAILED and rediagnosed == []
    shown = loop.wait_text(incident_id, "interrupted (the bot stopped while it ran)")
    assert "Retry" in buttons(shown) and "running `systemd" not in json.dumps(shown)
    assert sweep() == []  # settled: nothing in flight any more
    assert ctx.incidents.inflight.entries() == []
    assert len(loop.standin.calls_of("chat.postMessage")) == cards  # the same message, edited
    stops = [e for e in sim.command_log()
             if e.get("tool") == "systemctl" and e["argv"][:2] == ["stop", UNIT]]
    assert stops == []  # the action was never run again
