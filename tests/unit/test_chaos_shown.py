"""Invariant 1 as the chaos checker counts it (issue 39): each alert shown by exactly one
message, read from the Slack stand-in's messages as seed 4242's 500/200 run left them.

A storm's member re-opened after a wipe takes over its card, a reply under the storm's
table, and posts its note in the storm's thread: the message it took over is that card,
not the table (five of that run's nine ``answered`` violations were the checker counting
the table as a second message). A timed-out card moved into a storm and posted again
there, or a card in flight at the wipe that the re-opened incident did not take over, are
two messages: still counted as two."""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from typing import Any, cast

from bot.core import strings
from bot.domain.incident_record import ChatRefs
from tests.helpers.chaos.checker import History, _answered_once
from tests.helpers.chaos.driver import Arming
from tests.helpers.serve_process import CHANNEL

TABLE = "1796542352.000035"


@dataclass
class _StandIn:
    messages: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    _cv: threading.Condition = field(default_factory=threading.Condition)

    def top_level(self, channel: str) -> list[dict[str, Any]]:
        return [m for (c, _), m in sorted(self.messages.items())
                if c == channel and not m.get("thread_ts")]

    def post(self, ts: str, key: str, text: str, thread: str = "") -> None:
        meta = {"event_type": "incident_bot_outbox", "event_payload": {"key": key}}
        self.messages[(CHANNEL, ts)] = {"ts": ts, "text": text, "metadata": json.dumps(meta),
                                        **({"thread_ts": thread} if thread else {})}


@dataclass
class _Incident:
    chat: ChatRefs | None


def _history(standin: _StandIn, incidents: list[str],
             stored: dict[str, _Incident] | None = None) -> History:
    arming = Arming("gpu-01", 41, "approve", incidents=incidents, alert_answers=[200])
    world = type("W", (), {"standin": standin})()
    driver = type("D", (), {"armings": [arming]})()
    return History(cast(Any, world), cast(Any, driver), [], cast(Any, None),
                   incidents=dict(stored or {}))


def _storm(standin: _StandIn) -> None:
    standin.post(TABLE, "storm-1/1", "Storm: 4 vram_idle incidents in this channel")


def test_a_reopened_storm_card_is_one_message_with_the_card_it_took_over() -> None:
    """gpu-01 #41: INC-271's card in storm-1's thread, Redis wiped, INC-1385 re-opened on
    that card; its note sits in the storm's thread; both records went with later wipes."""
    standin = _StandIn()
    _storm(standin)
    card = "1796542507.000161"
    standin.post(card, "INC-271/1", "gpu-01: … Approve or deny", TABLE)
    standin.post("1796542508.000162", "INC-271/2", "Evidence: 8 GPUs", TABLE)
    standin.post("1796542608.000238", "INC-1385/1",
                 "The bot's store lost INC-271 (remediating). This incident is *INC-1385* "
                 "now, diagnosed again from the host; this message is its message.", TABLE)
    standin.post("1796542611.000239", "INC-1385/4", "Evidence: 8 GPUs", card)
    assert list(_answered_once(_history(standin, ["INC-271", "INC-1385"]))) == []
    # the arming that saw only the re-opened one: still its one message
    assert list(_answered_once(_history(standin, ["INC-1385"]))) == []
    # and while the re-opened record is still in Redis, its chat names the same card
    stored = {"INC-1385": _Incident(ChatRefs(CHANNEL, card, TABLE))}
    assert list(_answered_once(_history(standin, ["INC-271", "INC-1385"], stored))) == []


def test_a_card_moved_into_a_storm_and_posted_again_is_two_messages() -> None:
    """gpu-06 #190: INC-5906's card timed out at the top of the channel, joined a storm
    that began meanwhile, and was posted again in the storm's thread."""
    standin = _StandIn()
    _storm(standin)
    standin.post("1796543092.000582", "INC-5906/1", "gpu-06: GpuMemoryHeldIdle. Diagnosing…")
    standin.post("1796543109.000590", "INC-5906/1", "gpu-06: GpuMemoryHeldIdle. Diagnosing…",
                 TABLE)
    (violation,) = _answered_once(_history(standin, ["INC-5906"]))
    assert "2 messages" in violation.detail


def test_a_card_in_flight_at_the_wipe_and_the_reopened_ones_own_are_two_messages() -> None:
    """gpu-02 #146: INC-5898's card reached the storm's thread as Redis was wiped; the
    re-open did not know it and INC-5836 posted a card of its own."""
    standin = _StandIn()
    _storm(standin)
    standin.post("1796543054.000550", "INC-5898/1", "gpu-02: … Approve or deny", TABLE)
    standin.post("1796543071.000564", "INC-5836/1", "gpu-02: GpuMemoryHeldIdle. Diagnosing…")
    (violation,) = _answered_once(_history(standin, ["INC-5898", "INC-5836"]))
    assert "2 messages" in violation.detail


def _announcement(standin: _StandIn, ts: str, *lines: str) -> None:
    head = strings.DATA_LOSS_HEAD.format(how=strings.DATA_LOSS_WIPED)
    standin.post(ts, "data-loss-6cdc86158b2e076c", "\n".join([head, *lines]))


def _messages(standin: _StandIn, incidents: list[str]) -> list[str]:
    """The run's violations of "each incident shown by one message" (the history has no
    faults: the announcement-per-wipe count is not this test's)."""
    return [v.detail for v in _answered_once(_history(standin, incidents))
            if "messages for" in v.detail]


def test_a_closed_incident_named_by_the_data_loss_announcement_is_shown_by_it() -> None:
    """gpu-03 #115: INC-4705's card waited in the outbox behind Slack's budget, the on-call
    fixed the host and the incident resolved, then a wipe took the card. The announcement
    names it: that is its one message."""
    standin = _StandIn()
    unshown = strings.DATA_LOSS_UNSHOWN_LINE.format(id="INC-4705", host="gpu-03",
                                                    kind="vram_idle", state="resolved")
    _announcement(standin, "1796542843.000400", strings.DATA_LOSS_NOTHING,
                  strings.DATA_LOSS_UNSHOWN, unshown)
    assert _messages(standin, ["INC-4705"]) == []
    # an open incident the announcement lists (re-opened) is not shown by it: its card is
    (violation,) = _messages(standin, ["INC-3591"])
    assert "0 messages" in violation
    # named by an announcement, yet its card did go out: two messages, as before
    standin.post("1796542838.000390", "INC-4705/1", "gpu-03: GpuMemoryHeldIdle. Diagnosing…")
    (violation,) = _messages(standin, ["INC-4705"])
    assert "2 messages" in violation


def test_an_announcement_that_does_not_name_the_incident_does_not_show_it() -> None:
    standin = _StandIn()
    lost = strings.DATA_LOSS_LINE.format(id="INC-4705", host="gpu-03", kind="vram_idle",
                                         state="awaiting approval", what="")
    _announcement(standin, "1796542843.000400",
                  strings.DATA_LOSS_LOST.format(n=1, s=""), lost)
    (violation,) = _messages(standin, ["INC-4705"])
    assert "0 messages" in violation
