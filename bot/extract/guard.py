"""Parent-death guard: a work horse exits when its worker dies.

RQ puts the work horse in its own process group, so killing the worker leaves the horse
running as an orphan while RQ's cleanup requeues the job: two runs side by side. With
``PR_SET_PDEATHSIG`` the kernel kills the horse the moment its parent goes; a watchdog
thread covers systems without ``prctl``.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import logging
import os
import signal
import threading
import time

from bot.core import strings

log = logging.getLogger(__name__)
PR_SET_PDEATHSIG = 1
WORKER_PID_ENV = "INCIDENT_BOT_WORKER_PID"


def _prctl_pdeathsig() -> bool:
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
        return int(libc.prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)) == 0
    return False


def _watchdog(parent: int, interval_s: float) -> None:
    while True:
        time.sleep(interval_s)
        if os.getppid() != parent:
            log.error(strings.EXTRACT_PARENT_GONE)
            os._exit(70)


def expected_parent() -> int | None:
    """The worker's pid when this process is one of its forked work horses."""
    value = os.environ.get(WORKER_PID_ENV, "")
    if not value.isdigit() or int(value) == os.getpid():
        return None
    return int(value)


def install(parent: int, interval_s: float = 1.0) -> None:
    """Die with ``parent``; exit at once if it is already gone (the race before prctl)."""
    _prctl_pdeathsig()
    if os.getppid() != parent:
        log.error(strings.EXTRACT_PARENT_GONE)
        os._exit(70)
    thread = threading.Thread(
        target=_watchdog, args=(parent, interval_s), daemon=True, name="pdeath"
    )
    thread.start()
