"""The chaos run, short form (issue 39): 20 incidents through two ``serve`` replicas on a
real Redis with its AOF, four simulated hosts behind real sshds, the Slack stand-in, while
a seeded scheduler injects 10 faults (SIGKILL/SIGSTOP of Redis, a replica or a host's
sshd, Redis restarted empty or out of memory or read-only, Slack 500/429/late, a host key
swapped, latency to a host). The checker reads the history and every invariant must hold
(``tests/helpers/chaos/checker.py``). A failure prints the seed and the history file: the
same seed replays the same faults and the same on-call decisions.

The long form is ``python -m bench.chaos --incidents 500 --faults 200 --seed N``
(docs/operations.md has its last result). ``CHAOS_SEED`` picks this run's seed.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.helpers.chaos.run import ChaosPlan, run_chaos

SEED = int(os.environ.get("CHAOS_SEED", "39"))


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_twenty_incidents_through_ten_faults_keep_every_invariant(tmp_path: Path) -> None:
    report = run_chaos(ChaosPlan(seed=SEED, incidents=20, faults=10), tmp_path)
    print("\n" + report.summary())
    assert len(report.armings) == 20 and len(report.faults) == 10
    assert all(f.healed >= f.started > 0 for f in report.faults)
    assert report.claims > 0  # the word check saw messages to check
    assert not report.violations, (
        f"chaos seed {SEED} broke {len(report.violations)} invariants (history: "
        f"{tmp_path / 'history.json'}; replay with CHAOS_SEED={SEED}):\n" + report.summary())
