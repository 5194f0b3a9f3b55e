"""The word a settled message leads with, from what was observed. Pure.

One function decides it, ``outcome_word``: the incident's state and what is known of its
last action (what its verify observed: fixed, not fixed, or could not check; does it undo
an earlier fix; does it resume an extraction; does an approved action that was not undone
since fix what the headline names; does the newest look at the GPUs show them held) in,
the word out. The chat layer only turns the word into its sentence
(``bot.chat.summary.outcome``).

The rules (issue 35: never a false word):

- **Could not check** when the host could not be read: the re-probe before acting, the
  verify after it, or the read-back after an interruption did not get an answer (refused
  connection, timeout, host key changed). A failed probe never means "no longer holds".
- **Reverted** when a revert ran and its verify saw the unit back as it was; a revert
  that did not take is **Not fixed**.
- **Not fixed** when verify saw the condition still there.
- **Resumed** for a verified resume of an extraction.
- **Fixed** only when verify saw the fix on the host, an approved action not undone since
  fixes what the headline names, and no newer look shows the GPUs held again.
- **Done** for any other verified action (a stop beside an ECC error, a drop-in after a
  revert): it did what it said, which is not the fix.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from bot.domain.action_result import ActionResult, Seen
from bot.domain.findings import Diagnosis, ProposedAction
from bot.domain.headline import FixesOf, choose, fixed_by

# the states whose message leads with what was done, not with the problem
OUTCOME_STATES = frozenset({"verified", "resumed", "resolved"})
# ...and where a word also leads: an action that did not hold, or could not be checked
WORD_STATES = OUTCOME_STATES | {"action_failed"}
_GPUS_FREE = re.compile(r"\b(\d+)/(\d+) GPUs free\b")  # verify's own words (REM_GPUS_FREE)


class OutcomeWord(StrEnum):
    FIXED = "fixed"
    DONE = "done"
    NOT_FIXED = "not_fixed"
    COULD_NOT_CHECK = "could_not_check"
    REVERTED = "reverted"
    RESUMED = "resumed"


@dataclass(frozen=True)
class Observed:
    """What is known of the incident's last action when its message is rendered."""

    state: str  # the incident's state
    seen: Seen | None  # what its verify observed (None: no action result to go by)
    undoes: bool = False  # the action undoes an earlier fix (a revert)
    resumes: bool = False  # the action resumed an extraction
    fixes_headline: bool = False  # it (or one approved before it, not undone) fixed the headline
    held_now: bool = False  # the newest look at the GPUs shows them held (after a revert)


def outcome_word(seen: Observed | None) -> OutcomeWord | None:
    """The word the message leads with; None while the headline leads."""
    if seen is None or seen.state not in WORD_STATES or seen.seen is None:
        return None
    if seen.seen is Seen.COULD_NOT_CHECK:
        return OutcomeWord.COULD_NOT_CHECK
    if seen.seen is Seen.NOT_FIXED:
        return OutcomeWord.NOT_FIXED
    if seen.state == "action_failed":  # a step failed though verify saw the effect: no word
        return None
    if seen.undoes:
        return OutcomeWord.REVERTED
    if seen.resumes:
        return OutcomeWord.RESUMED
    if seen.fixes_headline and not seen.held_now:
        return OutcomeWord.FIXED
    return OutcomeWord.DONE


def fixes_headline(result: ActionResult, earlier: Sequence[ProposedAction],
                   diagnosis: Diagnosis | None, fixes_of: FixesOf) -> bool:
    """Did what ran fix what the headline names? One of the approved actions (``earlier``:
    those not undone since) fixes the headline's finding (``headline.fixed_by``) and no GPU
    it looked at is still held. A stop that verified while another unit keeps the GPUs, or
    a GPU freed beside an ECC error, is done but not a fix."""
    if diagnosis is None:
        return True
    covers = set(choose(diagnosis, fixes_of).covers)
    found = list(enumerate(diagnosis.findings))
    own = ProposedAction("last", result.kind, dict(result.params), "", "")
    hits = [fixed_by(a, found, fixes_of(a.kind)) for a in (*earlier, own)]
    if not any(hit is not None and hit[0] in covers for hit in hits):
        return False
    detail = result.verification.detail if result.verification is not None else ""
    free = _GPUS_FREE.search(detail)
    return free is None or free[1] == free[2]
