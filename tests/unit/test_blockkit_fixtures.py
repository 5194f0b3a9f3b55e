"""The fleet-scale Block Kit fixtures (issue 37: a storm's table, the Home tab at 4, 40
and 400 hosts) are what the renderers produce today, and Slack's limits accept them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.fixtures.blockkit_cases import HERE, cases
from tests.helpers.blockkit_limits import problems

FILES = sorted(HERE.glob("*.json"))


def test_every_case_has_its_fixture_file() -> None:
    assert {p.name for p in FILES} == set(cases())


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_fixture_fits_slacks_limits(path: Path) -> None:
    payload = json.loads(path.read_text())
    surface = "home" if path.name.startswith("home_") else "message"
    assert problems(payload["blocks"], surface) == []


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_fixture_is_what_the_renderer_produces(path: Path) -> None:
    """Stale means a renderer changed: look at the new output, then regenerate
    (``python3 -m tests.fixtures.blockkit_cases --write``)."""
    assert json.loads(path.read_text()) == cases()[path.name]
