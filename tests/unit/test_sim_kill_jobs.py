"""The sim's ``kill`` signals a real process only when it is the session's own background
job (same process group), as bash's ``kill "$!"`` would; anything else is the simulated
table's (bot.sim.tools.kill)."""

from __future__ import annotations

import os
import signal
import subprocess

from bot.sim.tools import kill


def test_a_background_job_of_the_same_process_group_is_signalled_for_real() -> None:
    job = subprocess.Popen(["sleep", "30"])
    try:
        jobs = kill.own_jobs([str(job.pid)])
        assert jobs == (signal.SIGTERM.value, [job.pid])
        assert kill.signal_jobs(*jobs) == 0
        assert job.wait(timeout=10) == -signal.SIGTERM
    finally:
        job.kill()


def test_a_process_of_another_group_or_a_simulated_pid_is_left_to_the_table() -> None:
    other = subprocess.Popen(["sleep", "30"], start_new_session=True)
    try:
        assert kill.own_jobs([str(other.pid)]) is None
        assert kill.own_jobs(["1"]) is None
        assert kill.own_jobs([str(os.getpid())]) is None
        assert kill.own_jobs(["-KILL", "999999"]) is None  # no such real process
        assert kill.own_jobs(["-s", "NOPE", str(other.pid)]) is None
        assert other.poll() is None
    finally:
        other.kill()
        other.wait()
