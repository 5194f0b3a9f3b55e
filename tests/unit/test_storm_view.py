"""A storm's table (issue 37): within Slack's limits at any size, most in need of a person
first, and no host ever left out without "N of M shown" and its name or its count."""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bot.chat.blockkit import to_blocks
from bot.chat.storm_view import ORDER, StormRow, StormView, rank, render_storm
from tests.fixtures.blockkit_cases import approve, storm_view
from tests.helpers.blockkit_limits import problems, texts

SHOWN = re.compile(r"(\d+) of (\d+) shown")


def accounted(view: StormView) -> tuple[set[str], int]:
    """Hosts named in the rendered message, and the hosts it counts without naming."""
    message = render_storm(view)
    blocks = to_blocks(message)
    words = "\n".join(texts(blocks))
    named = {r.host for r in view.rows
             if re.search(rf"(?<![\w-]){re.escape(r.host)}(?![\w-])", words)}
    counted = sum(int(n) for n in re.findall(r"… and (\d+) more", words))
    return named, counted


@pytest.mark.parametrize("n", [1, 12, 46, 47, 200, 400, 2000])
def test_every_size_fits_slacks_limits_and_says_what_is_cut(n: int) -> None:
    view = storm_view(n)
    message = render_storm(view)
    blocks = to_blocks(message)
    assert problems(blocks) == []
    shown = SHOWN.search(json.dumps(blocks))
    assert shown is not None and int(shown.group(2)) == n
    rows = [b for b in blocks if b["type"] == "section" and "accessory" in b]
    assert len(rows) <= int(shown.group(1))
    assert f"*{n} hosts*" in json.dumps(blocks) or f"*{n:,} hosts*" in json.dumps(blocks)


@pytest.mark.parametrize("n", [5, 60, 400])
def test_no_host_is_dropped_without_its_name_or_its_count(n: int) -> None:
    view = storm_view(n)
    named, counted = accounted(view)
    assert len(named) + counted >= n, f"{n - len(named) - counted} hosts neither named nor counted"


def test_waiting_clicks_come_first_then_failures_then_the_rest() -> None:
    rows = [StormRow("1", "a", "verified"), StormRow("2", "b", "awaiting_approval"),
            StormRow("3", "c", "diagnosing"), StormRow("4", "d", "diagnosis_failed"),
            StormRow("5", "e", "awaiting_approval")]
    assert [r.host for r in rank(rows)] == ["b", "e", "d", "c", "a"]
    assert ORDER.index("awaiting_approval") == 0


def test_a_row_carries_the_button_that_matters_with_its_confirm() -> None:
    view = StormView("storm-1", "vram_idle", 0.0, (StormRow(
        "7", "gpu-07", "awaiting_approval", "8 GPUs held idle", approve("A7", "gpu-07")),))
    blocks = to_blocks(render_storm(view))
    row = next(b for b in blocks if "accessory" in b)
    assert row["accessory"]["action_id"] == "approve" and row["accessory"]["value"] == "A7"
    assert "systemctl stop" in row["accessory"]["confirm"]["text"]["text"]
    assert "gpu-07" in row["text"]["text"] and "8 GPUs held idle" in row["text"]["text"]


def test_untrusted_host_names_are_escaped() -> None:
    rows = [StormRow("1", "<!channel>", "diagnosing"),
            *(StormRow(str(n), f"<@U{n}>", "verified") for n in range(2, 80))]
    view = StormView("storm-1", "vram_idle", 0.0, tuple(rows))
    words = json.dumps(to_blocks(render_storm(view)))
    assert "<!channel>" not in words and "<@U2>" not in words


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.text(min_size=1, max_size=260), st.sampled_from(ORDER),
                          st.text(max_size=400), st.booleans()), max_size=120))
def test_any_storm_fits(raw: list[tuple[str, str, str, bool]]) -> None:
    rows = tuple(StormRow(str(n), host, state, headline,
                          approve(f"A{n}", host) if click else None)
                 for n, (host, state, headline, click) in enumerate(raw))
    assert problems(to_blocks(render_storm(StormView("storm-9", "disk_full", 0.0, rows)))) == []
