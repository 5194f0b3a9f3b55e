"""The word a settled message leads with, from what was observed (one pure function), over
every case: each state, each thing verify saw (fixed, not fixed, could not check, nothing),
undo, resume, fixes the headline, the GPUs held again."""

from __future__ import annotations

import itertools

import pytest

from bot.domain.action_result import Seen
from bot.domain.lifecycle import IncidentState
from bot.domain.outcome_word import (
    OUTCOME_STATES,
    WORD_STATES,
    Observed,
    OutcomeWord,
    outcome_word,
)

W = OutcomeWord
STATES = sorted({s.value for s in IncidentState})
SEEN = [None, *Seen]
FLAGS = [(False, True)] * 4


def expected(state: str, seen: Seen | None, undoes: bool, resumes: bool, fixes: bool,
             held: bool) -> OutcomeWord | None:
    """The rules, written out once more as a table a person can check."""
    if state not in WORD_STATES or seen is None:
        return None
    if seen is Seen.COULD_NOT_CHECK:
        return W.COULD_NOT_CHECK
    if seen is Seen.NOT_FIXED:
        return W.NOT_FIXED
    if state == "action_failed":
        return None
    if undoes:
        return W.REVERTED
    if resumes:
        return W.RESUMED
    return W.FIXED if fixes and not held else W.DONE


@pytest.mark.parametrize(("state", "seen", "undoes", "resumes", "fixes", "held"),
                         list(itertools.product(STATES, SEEN, *FLAGS)))
def test_the_word_for_every_case(state: str, seen: Seen | None, undoes: bool, resumes: bool,
                                 fixes: bool, held: bool) -> None:
    word = outcome_word(Observed(state, seen, undoes, resumes, fixes, held))
    assert word is expected(state, seen, undoes, resumes, fixes, held)


@pytest.mark.parametrize(("state", "undoes", "resumes", "fixes", "held"),
                         list(itertools.product(STATES, *FLAGS)))
def test_fixed_is_said_only_of_a_fix_that_verify_saw(state: str, undoes: bool, resumes: bool,
                                                    fixes: bool, held: bool) -> None:
    """Whatever else is true, Fixed needs verify to have seen the fix, the headline's
    finding fixed by an action not undone since, and no newer look showing GPUs held."""
    for seen in SEEN:
        word = outcome_word(Observed(state, seen, undoes, resumes, fixes, held))
        if word is W.FIXED:
            assert seen is Seen.FIXED and fixes and not held and not undoes and not resumes
            assert state in OUTCOME_STATES


def test_a_check_that_could_not_run_is_never_fixed_nor_gone() -> None:
    for state in WORD_STATES:
        for flags in itertools.product(*FLAGS):
            assert outcome_word(Observed(state, Seen.COULD_NOT_CHECK, *flags)) \
                is W.COULD_NOT_CHECK


def test_a_revert_is_reverted_only_when_its_verify_saw_it() -> None:
    assert outcome_word(Observed("verified", Seen.FIXED, undoes=True)) is W.REVERTED
    assert outcome_word(Observed("action_failed", Seen.NOT_FIXED, undoes=True)) is W.NOT_FIXED
    # a drop-in approved after a revert: done, not fixed, while the GPUs are held again
    assert outcome_word(Observed("verified", Seen.FIXED, fixes_headline=True,
                                 held_now=True)) is W.DONE


def test_no_observation_leaves_the_headline_leading() -> None:
    assert outcome_word(None) is None
    assert outcome_word(Observed("awaiting_approval", Seen.FIXED, fixes_headline=True)) is None
    assert {w.value for w in OutcomeWord} >= {"fixed", "done", "not_fixed", "could_not_check",
                                              "reverted"}
