"""``bench/burst.py`` in its short form (issue 37): ten hosts through two real ``serve``
processes, the Slack stand-in, a real Slurm controller and real sshds. This proves the
script runs and measures every stage; the 200-host figures are ``bench/run_all``'s, never
a test's."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from tests.fixtures.need import need

ROOT = Path(__file__).resolve().parents[2]


def test_a_ten_host_burst_runs_and_measures_every_stage(tmp_path: Path) -> None:
    need(all(shutil.which(b) or Path("/usr/sbin", b).exists()
             for b in ("slurmctld", "slurmd", "munged", "scontrol", "sshd")),
         "the burst needs sshd, Slurm and munge")
    out = tmp_path / "burst.json"
    proc = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "burst.py"), "--hosts", "10", "--spread", "2",
         "--approve-after", "2", "--timeout", "300", "--json", str(out)],
        capture_output=True, text=True, timeout=600, cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    r = json.loads(out.read_text())
    assert r["settled"], r["not_settled"]
    mix, stages = r["mix"], r["stages"]
    assert stages["visible"]["n"] == stages["diagnosed"]["n"] == 10
    assert stages["verified"]["n"] == stages["dispatched"]["n"] == mix["seed"] > 0
    assert stages["drained"]["n"] == mix["gpu_xid79"] > 0  # the real controller's drains
    assert r["bot_cpu_per_incident_s"] > 0 and r["redis_commands_per_incident"] > 0
    assert "burst: 10 hosts" in proc.stdout and "NVSentinel" in proc.stdout
