"""Storms in chat (issue 37): above a rate of new incidents a minute in a channel, one
message per kind with a live table, edited at Slack's pace.

Where it sits: the publisher asks ``Storms.place`` when an incident's first message is
due (the alert card, or the card itself). Placed in a storm, the incident gets no alert
card of its own: its row in the storm's table is where it is seen first, within Slack's
spacing of edits of one message. Its card is posted once it has a diagnosis, as a reply
in the storm's thread (the outbox asks ``placement`` when it sends a card), and its
evidence and later replies follow it there: each host's evidence still exists, one
message per host, at Slack's pace, while the table shows the whole burst at once.

The table is rendered from stored incidents, never from an event: each change of a member
marks the storm dirty; one thread per process renders a dirty storm at most once per
``interval_s`` and hands the edit to the
outbox as urgent (before anyone's own edits, and allowed the workspace's last ``chat.update``
of a burst). Slack spaces edits of one message (2 s in our budget): rendering every second
keeps what goes out at most a second old. Two replicas may both render: the outbox sends
the newest render and drops the older one.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from bot.chat.base import Button, ButtonStyle, ChatMessage
from bot.chat.incident_view import incident_buttons
from bot.chat.outbox import CARD, STORM_TABLE, ChatOutbox
from bot.chat.render import offer_buttons
from bot.chat.storm_view import MAX_ROWS, StormRow, StormView, rank, render_storm
from bot.chat.summary import headline_of
from bot.chat.text import clip, escape
from bot.core.errors import log_internal
from bot.domain.incident import Incident
from bot.domain.lifecycle import IncidentState
from storage.chat_outbox import Op
from storage.connection import StorageError
from storage.incidents import IncidentStore
from storage.renders import RenderLedger
from storage.storms import Storm, StormStore

log = logging.getLogger(__name__)

TABLE = STORM_TABLE  # the outbox purpose of a storm's message
ROW_CACHE = 10_000  # shown rows kept per process between renders


class Storms:
    def __init__(self, store: StormStore, incidents: IncidentStore, outbox: ChatOutbox,
                 renders: RenderLedger, *, clock: Callable[[], float] = time.time,
                 interval_s: float = 1.0) -> None:
        self.store, self.incidents, self.outbox = store, incidents, outbox
        self.renders, self.clock = renders, clock
        self.interval_s = interval_s
        self._known: dict[str, str] = {}  # incident id → its storm (a placement never moves)
        # incident id → (its ``updated`` when read, its row): read in full again on change
        self._rows: dict[str, tuple[str, StormRow | None]] = {}
        self._dirty: set[str] = set()
        self._last: dict[str, float] = {}  # storm id → when it was last rendered here
        self._cv = threading.Condition()

    # --- placement ----------------------------------------------------------------------
    def place(self, incident: Incident, channel: str) -> str | None:
        """The storm the incident's first message goes to (None: its own message). A storm
        that starts here posts its table now; either way its table is due an edit."""
        placement = self.store.place(incident.id, incident.kind, channel, self.clock(), CARD)
        if placement.storm is None:
            return None
        storm = placement.storm
        self._known[incident.id] = storm.id
        if placement.started:
            log.info("storm %s: %s incidents in %s above %d a minute", storm.id, storm.kind,
                     storm.channel, self.store.threshold)
            self._post_table(storm)
        self.changed(storm.id)
        return storm.id

    def storm_of(self, incident_id: str) -> str | None:
        """The incident's storm, if it was placed in one (a cache of what storage holds)."""
        known = self._known.get(incident_id)
        if known is None and (known := self.store.storm_of(incident_id)) is not None:
            self._known[incident_id] = known
        return known

    def placement(self, incident_id: str) -> tuple[str, str] | None:
        """For the outbox: the message whose thread the incident's card goes in."""
        storm = self.storm_of(incident_id)
        return (storm, TABLE) if storm is not None else None

    def touch(self, incident_id: str) -> None:
        """A member's stored state changed: its storm's table is due an edit."""
        storm = self.storm_of(incident_id)
        if storm is not None:
            self.changed(storm)

    def changed(self, storm_id: str) -> None:
        with self._cv:
            self._dirty.add(storm_id)
            self._cv.notify_all()

    # --- the table ----------------------------------------------------------------------
    def view(self, storm: Storm) -> StormView:
        """Every member as a row; the rows that can be shown get their headline and the
        button that matters, with the card's own words and buttons (``row_of``)."""
        members = self.incidents.glance(self.store.members(storm.id))
        changed = {i: updated for i, _, _, updated in members}
        rows = rank(StormRow(i, host, state) for i, host, state, _ in members)
        stale = [r.incident_id for r in rows[:MAX_ROWS]
                 if self._rows.get(r.incident_id, ("", None))[0] != changed[r.incident_id]]
        if len(self._rows) > ROW_CACHE:  # storms long over: read again if ever shown
            self._rows.clear()
        for incident in self.incidents.get_many(stale):
            self._rows[incident.id] = (changed[incident.id], row_of(incident))
        rows[:MAX_ROWS] = [self._rows.get(r.incident_id, ("", r))[1] or r
                           for r in rows[:MAX_ROWS]]
        return StormView(storm.id, storm.kind, storm.started, tuple(rows))

    def render(self, storm: Storm) -> ChatMessage:
        return render_storm(self.view(storm), seq=self.renders.next_seq(storm.id))

    def refresh(self, storm_id: str) -> bool:
        """Render the storm's table from storage and queue the edit; False if unknown."""
        storm = self.store.get(storm_id)
        if storm is None:
            return False
        self.outbox.send(storm.id, TABLE, Op.UPDATE, self.render(storm), storm.channel,
                         urgent=True)
        return True

    def _post_table(self, storm: Storm) -> None:
        """The storm's message, queued for the outbox loop (the caller may be the flow's
        event loop, which never waits on Slack)."""
        self.outbox.send(storm.id, TABLE, Op.POST, self.render(storm), storm.channel,
                         deliver=False)

    def run(self, stop: threading.Event) -> None:
        """The render loop (one thread per process): each dirty storm at most once per
        ``interval_s``."""
        while not stop.is_set():
            for storm_id in self._take_due():
                try:
                    self.refresh(storm_id)
                except StorageError as exc:  # Redis away: rendered again once it answers
                    log.warning("storm %s: storage unavailable: %s", storm_id, exc)
                    self.changed(storm_id)
                except Exception as exc:
                    log_internal(exc, f"the table of {storm_id}")
            with self._cv:
                if not stop.is_set():
                    self._cv.wait(self._next_wait() if self._dirty else 1.0)

    def wake(self) -> None:
        """Let the loop look at ``stop`` now (shutdown)."""
        with self._cv:
            self._cv.notify_all()

    def _take_due(self) -> list[str]:
        now = time.monotonic()
        with self._cv:
            due = [s for s in self._dirty if now - self._last.get(s, 0.0) >= self.interval_s]
            for storm_id in due:
                self._dirty.discard(storm_id)
                self._last[storm_id] = now
        return due

    def _next_wait(self) -> float:
        now = time.monotonic()
        waits = [self._last.get(s, 0.0) + self.interval_s - now for s in self._dirty]
        return max(0.02, min(waits, default=1.0))


def row_of(incident: Incident) -> StormRow:
    """A shown row, from the stored incident alone (a table renders up to 46 of them
    every two seconds, so not the whole card): the latest result line, else the
    diagnosis's headline (``bot.domain.headline``, the card's rule), else the alert; and
    the button that matters: the first offer's Approve (its confirm naming the commands,
    as on the card) while it awaits approval, Retry when the diagnosis failed."""
    state = incident.state.value
    if incident.results:
        headline = incident.results[-1].text
    elif incident.diagnosis is not None:
        headline = headline_of(incident.diagnosis).text
    else:
        headline = incident.summary
    button: Button | None = None
    if incident.state is IncidentState.AWAITING_APPROVAL and incident.plans:
        button = offer_buttons(incident.host, incident.plans[0])[0]
    else:
        button = next((b for b in incident_buttons(state, incident.id,
                                                   bool(incident.acked_by))
                       if b.style is ButtonStyle.PRIMARY), None)
    return StormRow(incident.id, incident.host, state, escape(clip(headline, 200)), button)
