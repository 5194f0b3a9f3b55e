"""The chaos run, long form (issue 39): ``python -m bench.chaos --incidents 500 --faults 200
--seed N``. The same harness as the short form in the default suite
(``tests/chaos/test_chaos.py``, ``tests/helpers/chaos/``): two ``serve`` replicas on a real
Redis with its AOF, simulated hosts behind real sshds, the Slack stand-in, a seeded fault
scheduler, and the checker over the history. Prints the report; exit status 1 when an
invariant broke (the history is kept under --keep, or a temporary directory it names).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.helpers.chaos.run import ChaosPlan, run_chaos  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--incidents", type=int, default=500)
    parser.add_argument("--faults", type=int, default=200)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--hosts", type=int, default=8)
    parser.add_argument("--replicas", type=int, default=2)
    parser.add_argument("--keep", type=Path, default=None,
                        help="directory for the run's files and history.json")
    args = parser.parse_args(argv)
    where = args.keep or Path(tempfile.mkdtemp(prefix=f"chaos-{args.seed}-"))
    where.mkdir(parents=True, exist_ok=True)
    print(f"chaos: seed {args.seed}, {args.incidents} incidents, {args.faults} faults, "
          f"{args.hosts} hosts, {args.replicas} replicas; files in {where}", flush=True)
    plan = ChaosPlan(seed=args.seed, incidents=args.incidents, faults=args.faults,
                     hosts=args.hosts, replicas=args.replicas)
    report = run_chaos(plan, where, log=True)
    print(report.summary())
    print(f"history: {where / 'history.json'}")
    return 1 if report.violations else 0


if __name__ == "__main__":
    sys.exit(main())
