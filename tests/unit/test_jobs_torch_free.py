"""The bot's process never loads torch: importing the jobs API, the flow, the Home tab,
the HTTP server and ``serve`` leaves ``torch`` out of ``sys.modules`` (the import rule in
tests/test_architecture.py checks the source; this checks what Python actually loads).
Only the worker's run body (``bot.extract.job``) brings torch in."""

from __future__ import annotations

import subprocess
import sys

import pytest

BOT_SIDE = ("bot.jobs.book", "bot.jobs.queue", "bot.jobs.status", "bot.jobs.states",
            "bot.jobs.progress", "bot.flow.assembly", "bot.chat.home_tab", "bot.ingest.http",
            "bot.service", "bot.commands.extract")


def _loads_torch(*modules: str) -> bool:
    code = (f"import importlib, sys\nfor m in {list(modules)!r}: importlib.import_module(m)\n"
            "print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120, check=True).stdout
    return out.strip().splitlines()[-1] == "True"


def test_the_bot_side_imports_no_torch() -> None:
    assert not _loads_torch(*BOT_SIDE)


@pytest.mark.parametrize("module", ["bot.extract.job", "bot.extract.demo_data"])
def test_the_run_body_does_load_it(module: str) -> None:
    """The check above can fail: the worker side loads torch on import."""
    assert _loads_torch(module)
