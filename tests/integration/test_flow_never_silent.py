"""No silent incident: an error of ours at any step of the diagnosis leaves a posted message
(``diagnosis_failed``, the error id, Retry), never an incident stuck in ``diagnosing``.

Each case breaks one collaborator of the assembled flow (the inventory lookup, the
playbook run over a real sshd, the planner, the first render) and reads what a person sees.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from redis import Redis

from bot.config.settings import Settings
from bot.domain.incident import Alert
from bot.domain.lifecycle import IncidentState
from bot.flow.assembly import Flow, build_flow
from bot.sim.sshd import SimHost
from bot.ssh.pool import ParamikoPool
from storage.stores import open_stores
from tests.helpers.chat import RecordingChat

FAST_DIAG = {"samples": 2, "sample_interval_s": 0.1, "command_timeout_s": 4.0}


@pytest.fixture
def flow(redis: Redis, redis_url: str,
         sim_factory: Callable[..., SimHost]) -> Iterator[tuple[Flow, RecordingChat]]:
    sim = sim_factory("seed")
    settings = Settings.model_validate({
        "redis_url": redis_url, "chat_backend": "terminal",
        "hosts": {"gpu-01": {"ssh": sim.target, "key": str(sim.key_path),
                             "known_hosts": str(sim.known_hosts_path)}},
        "slack": {"approvers": ["UONCALL"]},
        "extra": {"diagnostics": FAST_DIAG}})
    chat = RecordingChat()
    pool = ParamikoPool(settings.ssh_defaults)
    yield build_flow(settings, open_stores(settings.redis_url), pool, chat), chat
    pool.close()


def breaks(step: str, flow: Flow) -> None:
    """Make one step of the diagnosis raise an error of ours."""
    def boom(*_a: Any, **_k: Any) -> Any:
        raise RuntimeError(f"injected failure in {step}")

    owner, name = {"target": (flow.hosts, "target_for"), "probes": (flow.hosts, "diagnose"),
                   "planning": (flow.plans, "make_plans"),
                   "render": (flow.publisher, "render_stored")}[step]
    if step != "render":
        setattr(owner, name, boom)
        return
    real = flow.publisher.render_stored
    calls = iter(range(10))

    def first_render_fails(incident: Any, *a: Any, **k: Any) -> Any:
        if incident.diagnosis is not None and next(calls) == 0:  # not the alert card's
            boom()
        return real(incident, *a, **k)

    flow.publisher.render_stored = first_render_fails  # type: ignore[method-assign]


@pytest.mark.parametrize("step", ["target", "probes", "planning", "render"])
def test_an_error_at_each_step_posts_diagnosis_failed_with_its_id(
        flow: tuple[Flow, RecordingChat], step: str, caplog: pytest.LogCaptureFixture) -> None:
    f, chat = flow
    incident, created = f.incidents.open_or_fold(Alert(source="test", host="gpu-01",
                                                       kind="vram_idle"))
    assert created
    breaks(step, f)
    settled = f.diagnose.on_opened(incident.id)

    assert settled.state is IncidentState.DIAGNOSIS_FAILED
    stored = f.incidents.require(incident.id)
    assert stored.state is IncidentState.DIAGNOSIS_FAILED and stored.plans == ()
    [logged] = [r.getMessage() for r in caplog.records if "internal error" in r.getMessage()]
    error_id = re.search(r"internal error (\w+)", logged)
    assert error_id is not None and f"diagnosis of {incident.id}" in logged
    [(_, _, _, ref)] = [p for p in chat.posts if p[2] is None]  # one channel message
    message = chat.last_version(ref)
    shown = " ".join(s.text for s in message.sections)
    assert "Diagnosis failed" in shown and error_id.group(1) in shown
    assert "Retry" in [b.label for b in message.buttons]  # the way out is on the message
    timeline = [(e.action, json.dumps(e.detail)) for e in f.audit.timeline(incident.id)]
    assert timeline[-1][:1] == ("transition", ) and "diagnosis_failed" in timeline[-1][1]
