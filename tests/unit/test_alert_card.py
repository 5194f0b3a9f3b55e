"""The alert card (issue 29): the incident's message before its diagnosis, from the stored
incident only: what fired, when, the labels that say more, and "diagnosing…"."""

from __future__ import annotations

from dataclasses import replace

from bot.chat.alert_card import render_alert_card, shown_labels
from bot.core import strings
from bot.domain.findings import Severity
from bot.domain.incident import Incident
from bot.domain.lifecycle import IncidentState

FIRED = 1_790_000_000.0
INC = Incident(id="INC-7", host="gpu-09", kind="vram_idle", state=IncidentState.DIAGNOSING,
               summary="GPU memory held at 0% utilisation", severity=Severity.CRITICAL,
               first_seen=FIRED, updated=FIRED + 1, hosts=("gpu-09",),
               labels={"alertname": "GpuVramHeldIdle", "gpu": "0-7", "instance": "gpu-09:9100",
                       "team": "<!channel>"})


def text_of(incident: Incident, **kw: object) -> str:
    card = render_alert_card(incident, now=FIRED + 1, **kw)  # type: ignore[arg-type]
    return "\n".join([card.text, *(s.text for s in card.sections)])


def test_it_says_what_fired_when_and_that_the_diagnosis_runs() -> None:
    card = render_alert_card(INC, seq=4, now=FIRED + 1, oncall="S0ONCALL")
    text = text_of(INC, oncall="S0ONCALL")
    assert card.seq == 4 and card.incident_id == "INC-7"
    assert card.text.startswith("<!subteam^S0ONCALL> gpu-09: GPU memory held at 0% util")
    assert "Diagnosing" in card.sections[1].text and "INC-7" in card.sections[1].text
    assert "Alert `vram_idle` (critical) fired at" in text
    assert strings.MSG_ALERT_DIAGNOSING in text
    assert card.buttons == ()  # nothing to click while the probes run


def test_only_the_labels_that_say_more_and_escaped() -> None:
    labels = shown_labels(INC.labels)
    assert labels == ["gpu=0-7", "team=&lt;!channel&gt;"]


def test_without_a_summary_the_alert_name_then_the_kind() -> None:
    assert "gpu-09: GpuVramHeldIdle" in text_of(replace(INC, summary=""))
    assert "gpu-09: vram_idle alert" in text_of(replace(INC, summary="", labels={}))


def test_a_state_past_diagnosing_drops_the_note_and_shows_its_buttons() -> None:
    resolved = replace(INC, state=IncidentState.RESOLVED, resolved_by="UBOB")
    assert strings.MSG_ALERT_DIAGNOSING not in text_of(resolved)
    assert "Resolved by" in text_of(resolved)
    snoozed = render_alert_card(replace(INC, state=IncidentState.SNOOZED), now=FIRED)
    assert [b.action_id for b in snoozed.buttons] == ["incident_resolve"]


def test_a_summary_that_starts_with_the_host_does_not_say_it_twice() -> None:
    text = text_of(replace(INC, summary="gpu-09 booted 2 minutes ago"))
    assert "*gpu-09: booted 2 minutes ago*" in text
