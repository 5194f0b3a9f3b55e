"""The demo's transcript kept in docs/ reads true: with --yes and with a person typing, the
boot time, done/total, resumed-at, written/skipped/repaired and the step timings agree
with each other (not a golden compare: timings differ run to run, the arithmetic may not)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.helpers.demo import disagreements, read

DOC = Path(__file__).resolve().parents[2] / "docs" / "demo-transcript.md"


def blocks() -> dict[str, str]:
    text = DOC.read_text()
    found = re.findall(r"^## (.+?)\n\n```text\n(.*?)\n```", text, re.M | re.S)
    return dict(found)


def test_the_transcript_has_both_ways() -> None:
    assert list(blocks()) == ["`incident-bot demo --yes`", "`incident-bot demo`, a person typing"]


@pytest.mark.parametrize("way", ["`incident-bot demo --yes`",
                                 "`incident-bot demo`, a person typing"])
def test_its_numbers_agree(way: str) -> None:
    text = blocks()[way]
    assert disagreements(text) == []
    got = read(text)
    assert (got.waited is None) == ("--yes" in way)
    assert text.startswith("Starting the demo's world") and "nothing left running" in text


@pytest.mark.parametrize(("change", "words"), [
    (("resumed at 103", "resumed at 104"), "resumed at 104"),
    (("booted 23 min ago. Diagnosing", "booted 2 min ago. Diagnosing"), "boot time differs"),
    (("was 104/200 done (52.0%)", "was 104/200 done (49.0%)"), "49.0% is not 104/200"),
    (("97 written", "98 written"), "+ 98 written"),
])
def test_the_check_finds_a_planted_contradiction(change: tuple[str, str], words: str) -> None:
    text = blocks()["`incident-bot demo --yes`"]
    assert change[0] in text
    found = disagreements(text.replace(change[0], change[1]))
    assert any(words in line for line in found), found
