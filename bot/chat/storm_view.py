"""A storm's one message: a live table of the burst's hosts, most in need of a person first
(pure; issue 37).

At 200 incidents a minute, one message each would take Slack more than three minutes to
show (about one post a second per channel). A storm is one message per kind, edited at
Slack's pace: a count per state for every host, then one row per host (state, headline,
the button that matters) for as many as fit Slack's limits, then every host that did not
fit, by name, grouped by state. Nothing is dropped silently: when rows are cut the
message says "N of M shown" and where the rest are (the thread holds every host's card
and evidence; ``/ir status`` lists every open incident).

Slack's limits (docs.slack.dev, Block Kit reference): 50 blocks a message, 3000 characters
of section text, 150 of header, 75 of button text, 300 of a confirm dialog's text.
Slack also refuses a message whose blocks carry more than about 13,200 characters of text
in all (``msg_blocks_too_long``, not in the reference; slackapi/bolt-js#2509), so rows
are added while the text stays under ``TEXT_BUDGET``. ``tests/unit/test_storm_view.py``
checks the fixtures in ``tests/fixtures/blockkit/`` against every one of them.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from bot.chat.base import Button, ChatMessage, Section
from bot.chat.summary import STATE_ICON
from bot.chat.text import clip, escape
from bot.core import fmt, strings

MAX_BLOCKS = 50
ROW_TEXT = 300
REST_TEXT = 3000
CONTEXT_TEXT = 300
TEXT_BUDGET = 12_000  # below the ~13,200 characters Slack refuses as msg_blocks_too_long
FIXED_BLOCKS = 4  # header, counts, the hosts not in the table, context
MAX_ROWS = MAX_BLOCKS - FIXED_BLOCKS

# What a person should look at first: a click is waiting, then something failed, then
# what is still moving, then what is settled. States not listed sort last.
ORDER = ("awaiting_approval", "action_failed", "diagnosis_failed", "no_action", "denied",
         "expired", "open", "diagnosing", "approved", "remediating", "snoozed", "verified",
         "resumed", "resolved")


@dataclass(frozen=True)
class StormRow:
    """One host of the storm: its incident, state, headline (mrkdwn, already escaped: the
    first line of the host's own card) and the button that matters (None: nothing to
    click, or not computed because the row is not shown)."""

    incident_id: str
    host: str
    state: str
    headline: str = ""
    button: Button | None = None


@dataclass(frozen=True)
class StormView:
    storm_id: str
    kind: str
    started: float
    rows: tuple[StormRow, ...]


def rank(rows: Iterable[StormRow]) -> list[StormRow]:
    """Most in need of a person first; then by host name, so the table does not shuffle."""
    where = {state: n for n, state in enumerate(ORDER)}
    return sorted(rows, key=lambda r: (where.get(r.state, len(ORDER)), r.host, r.incident_id))


def render_storm(view: StormView, *, seq: int = 0, max_rows: int = MAX_ROWS) -> ChatMessage:
    """The storm's message: counts, the rows that fit, the rest by name, where to look."""
    ranked = rank(view.rows)
    total = len(ranked)
    counts = _counts(ranked)
    head = strings.STORM_HEADER.format(n=total, kind=view.kind, since=_clock(view.started))
    shown, used = [], len(head) + len(counts)
    for row in ranked[:max(0, min(max_rows, MAX_ROWS))]:
        section = row_section(row)
        weight = _weight(section)
        if used + weight > TEXT_BUDGET - REST_TEXT - CONTEXT_TEXT:
            break
        shown.append(section)
        used += weight
    rest = ranked[len(shown):]
    sections = [Section(counts), *shown]
    if rest:
        sections.append(Section(rest_text(rest)))
    cut = strings.STORM_SHOWN.format(shown=len(shown), total=total)
    return ChatMessage(
        text=strings.STORM_FALLBACK.format(n=total, kind=view.kind), header=head,
        sections=tuple(sections),
        context=(clip(strings.STORM_CONTEXT.format(shown=cut, id=view.storm_id), CONTEXT_TEXT),),
        incident_id=view.storm_id, seq=seq)


def row_section(row: StormRow) -> Section:
    text = strings.STORM_ROW.format(
        icon=STATE_ICON.get(row.state, ":white_circle:"), host=escape(row.host),
        state=_state(row.state), headline=row.headline or strings.STORM_ROW_WAITING)
    return Section(clip(text, ROW_TEXT), accessory=row.button)


def rest_text(rest: Sequence[StormRow]) -> str:
    """Every host not in the table, by state, as many names as fit; the count always."""
    lines = [strings.STORM_REST_TITLE.format(n=len(rest))]
    budget = REST_TEXT - len(lines[0]) - 1
    by_state: dict[str, list[str]] = {}
    for row in rest:  # already ranked: states come in ORDER
        by_state.setdefault(row.state, []).append(row.host)
    for state, hosts in by_state.items():
        line = _rest_line(state, hosts, max(0, budget // max(1, len(by_state))))
        lines.append(line)
        budget -= len(line) + 1
    return clip("\n".join(lines), REST_TEXT)


def _rest_line(state: str, hosts: list[str], room: int) -> str:
    head = strings.STORM_REST_STATE.format(icon=STATE_ICON.get(state, ":white_circle:"),
                                           state=_state(state), n=len(hosts), hosts="")
    names: list[str] = []
    size = len(head)
    for n, host in enumerate(hosts):
        name = escape(host)
        more = strings.STORM_REST_MORE.format(n=len(hosts) - n)
        if size + len(name) + 2 + len(more) > room and n < len(hosts):
            return head + ", ".join(names) + more
        names.append(name)
        size += len(name) + 2
    return head + ", ".join(names)


def _counts(rows: Sequence[StormRow]) -> str:
    by_state = Counter(r.state for r in rows)
    parts = [strings.STORM_COUNT.format(icon=STATE_ICON.get(s, ":white_circle:"), n=n,
                                        state=_state(s))
             for s, n in sorted(by_state.items(),
                                key=lambda kv: ORDER.index(kv[0]) if kv[0] in ORDER
                                else len(ORDER))]
    return strings.STORM_COUNTS.format(n=fmt.count(len(rows)), counts=" · ".join(parts))


def _weight(section: Section) -> int:
    """Characters the section adds to the message's text (its button's words included)."""
    button = section.accessory
    extra = 0
    if button is not None:
        extra = len(button.label) + len(button.confirm or "") + 60  # confirm title + words
    return len(section.text) + extra


def _state(state: str) -> str:
    return state.replace("_", " ")


def _clock(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%H:%M")
