"""The word a settled message leads with, from what verify observed (one pure function)."""

from __future__ import annotations

import itertools

import pytest

from bot.domain.lifecycle import IncidentState
from bot.domain.outcome_word import OUTCOME_STATES, Observed, OutcomeWord, outcome_word

STATES = sorted({s.value for s in IncidentState})


@pytest.mark.parametrize(("state", "verified", "undoes", "resumes", "fixes"),
                         list(itertools.product(STATES, *[(False, True)] * 4)))
def test_the_word_for_every_case(state: str, verified: bool, undoes: bool, resumes: bool,
                                 fixes: bool) -> None:
    word = outcome_word(Observed(state, verified, undoes, resumes, fixes))
    if state not in OUTCOME_STATES or not verified:
        assert word is None  # the headline leads
    elif undoes:
        assert word is OutcomeWord.REVERTED
    elif resumes:
        assert word is OutcomeWord.RESUMED
    else:
        assert word is (OutcomeWord.FIXED if fixes else OutcomeWord.DONE)


def test_no_observation_leaves_the_headline_leading() -> None:
    assert outcome_word(None) is None
    assert {w.value for w in OutcomeWord} >= {"fixed", "done", "not_fixed", "could_not_check",
                                              "reverted"}
