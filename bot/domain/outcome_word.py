"""The word a settled message leads with, from what verify observed. Pure.

One function decides it, ``outcome_word``: the incident's state and what is known of its
last action (did verify see it work; does it undo an earlier fix; does it resume an
extraction; does what ran fix what the headline names) in, the word out. The chat layer
only turns the word into its sentence (``bot.chat.summary.outcome``).

Today's rule: a verified action leads a verified, resumed or resolved incident with
"Reverted" (it undid a fix), "Resumed" (an extraction), "Fixed" (it fixed what the
headline names and no GPU it looked at is still held) or "Done"; anything else leaves
the headline leading (None). ``NOT_FIXED`` and ``COULD_NOT_CHECK`` are the words for an
action that ran but did not hold, or could not be checked; this function does not give
them yet.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from bot.domain.action_result import ActionResult
from bot.domain.findings import Diagnosis, ProposedAction
from bot.domain.headline import FixesOf, choose, fixed_by

# the states whose message leads with what was done, not with the problem
OUTCOME_STATES = frozenset({"verified", "resumed", "resolved"})
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
    verified: bool  # verify saw the action's effect (its result is ok)
    undoes: bool = False  # the action undoes an earlier fix (a revert)
    resumes: bool = False  # the action resumed an extraction
    fixes_headline: bool = False  # it (or one approved before it) fixed the headline's finding


def outcome_word(seen: Observed | None) -> OutcomeWord | None:
    """The word the message leads with; None while the headline leads."""
    if seen is None or seen.state not in OUTCOME_STATES or not seen.verified:
        return None
    if seen.undoes:
        return OutcomeWord.REVERTED
    if seen.resumes:
        return OutcomeWord.RESUMED
    return OutcomeWord.FIXED if seen.fixes_headline else OutcomeWord.DONE


def fixes_headline(result: ActionResult, earlier: Sequence[ProposedAction],
                   diagnosis: Diagnosis | None, fixes_of: FixesOf) -> bool:
    """Did what ran fix what the headline names? One of the approved actions fixes the
    headline's finding (``headline.fixed_by``) and no GPU it looked at is still held. A
    stop that verified while another unit keeps the GPUs, or a GPU freed beside an ECC
    error, is done but not a fix."""
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
