"""The seed story's first message, from the real seed host's diagnosis over real SSH.

It must read in five seconds: at most 12 visible lines, the headline's facts, GiB units,
no repr or JSON, Block Kit within Slack's limits. The terminal prints the same words with
plain symbols. ``docs/message-example.md`` is regenerated here so it cannot drift.
"""

from __future__ import annotations

import io
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from bot.chat import blockkit as bk
from bot.chat.base import ChatMessage
from bot.chat.evidence import raw_evidence
from bot.chat.render import render_incident, thread_evidence
from bot.chat.summary import evidence_table
from bot.chat.terminal import TerminalBackend
from bot.domain.findings import Diagnosis, Severity
from bot.domain.incident import Incident
from bot.domain.incident_record import ActionPlan
from bot.domain.lifecycle import IncidentState
from bot.sim.sshd import SimHost
from bot.ssh.pool import ParamikoPool
from bot.ssh.settings import SSHSettings
from playbooks import run_playbook

EXAMPLE = Path(__file__).resolve().parents[2] / "docs" / "message-example.md"
UNIT = "vllm-kimi-k25-int4.service"
NOW = 1_764_600_000.0  # fixed, so the example file is stable
JSONISH = re.compile(r"[{}'\"]|\w+=\S|\": |\[\{|\w+\.\w+ unit")
EMOJI_CODE = re.compile(r":[a-z][a-z0-9_+-]*:")


@pytest.fixture
def seed_diagnosis(seed_sim: SimHost) -> Iterator[Diagnosis]:
    pool = ParamikoPool(SSHSettings(connect_timeout_s=2.0))
    try:
        yield run_playbook(pool, seed_sim.ssh_target(), "vram_idle")
    finally:
        pool.close()


def seed_incident() -> Incident:
    return Incident(id="INC-1", host="gpu-01", kind="vram_idle",
                    state=IncidentState.AWAITING_APPROVAL, severity=Severity.CRITICAL,
                    first_seen=NOW - 4 * 60 - 10)


def visible_lines(payload: dict[str, Any]) -> list[str]:
    """What Slack shows: every text line of every block; an actions row counts as one."""
    lines: list[str] = []
    for block in payload["blocks"]:
        if block["type"] == "actions":
            lines.append(" ".join(e["text"]["text"] for e in block["elements"]))
        elif block["type"] == "context":
            lines += [e["text"] for e in block["elements"]]
        else:
            lines += block["text"]["text"].splitlines()
    return lines


def first_message(diagnosis: Diagnosis) -> ChatMessage:
    """The real renderer, as the flow calls it for the first post."""
    plans = [ActionPlan(a, (f"systemctl stop {UNIT}",), f"appr-{i}")
             for i, a in enumerate(diagnosis.actions)]
    return render_incident(seed_incident(), diagnosis, plans, now=NOW, oncall="S0ONCALL")


def terminal_text(*messages: ChatMessage) -> str:
    console = Console(file=io.StringIO(), width=100, color_system=None, record=True)
    chat = TerminalBackend(console)
    ref = chat.post("C1", messages[0])
    for message in messages[1:]:
        chat.post("C1", message, thread=ref)
    return console.export_text()


def test_seed_first_message_reads_in_five_seconds(seed_diagnosis: Diagnosis) -> None:
    message = first_message(seed_diagnosis)
    payload = bk.to_payload(message)
    lines = visible_lines(payload)
    assert len(lines) <= 12, lines
    head = lines[0]
    for fact in ("gpu-01", "8 GPUs × 75.8 GiB", "at 0%", "since boot (", UNIT,
                 "auto-started at boot"):
        assert fact in head, (fact, head)
    shown = "\n".join(lines) + "\n" + payload["text"]
    assert not JSONISH.search(shown), JSONISH.search(shown)
    assert " GB" not in shown and "MiB" not in shown and "GiB" in shown
    assert "Stop " + UNIT in shown and "Risk:" in shown and "unmask" not in shown
    assert payload["text"].startswith("<!subteam^S0ONCALL> gpu-01: " + UNIT)
    assert "Approve or deny" in payload["text"]
    assert len(json.dumps(payload["blocks"])) < 50_000 and len(payload["blocks"]) <= 50
    assert all(b["type"] != "section" or len(b["text"]["text"]) <= 3000
               for b in payload["blocks"])
    styles = {e["text"]["text"]: e.get("style") for b in payload["blocks"]
              if b["type"] == "actions" for e in b["elements"]}
    assert styles["Approve"] == "primary" and styles["Deny"] is None  # Deny is not "danger"


def test_evidence_table_and_terminal_say_the_same_words(seed_diagnosis: Diagnosis) -> None:
    message = first_message(seed_diagnosis)
    table = evidence_table(seed_diagnosis)
    assert table is not None and table.code is not None
    assert thread_evidence(seed_diagnosis) == (table,)  # what the flow posts in the thread
    rows = table.code.splitlines()
    assert rows[0].split() == ["GPU", "MEMORY", "UTIL", "PID", "UNIT"] and len(rows) == 9
    assert all(re.search(rf"75\.8 / \d+\.\d GiB\s+0%\s+\d+\s+{re.escape(UNIT)}$", r)
               for r in rows[1:])
    text = terminal_text(message, ChatMessage(text=table.text, sections=(table,)))
    assert not EMOJI_CODE.search(text), EMOJI_CODE.search(text)
    flat = " ".join(re.sub(r"[│╭╮╰╯─]", " ", text).split())  # panel borders split lines
    for words in ("auto-started at boot, holds 8 GPUs × 75.8 GiB at 0% since boot (",
                  "Awaiting approval · incident INC-1", "@S0ONCALL gpu-01:"):
        assert words in flat, words


def test_docs_example_is_current(seed_diagnosis: Diagnosis) -> None:
    message = first_message(seed_diagnosis)
    table = evidence_table(seed_diagnosis)
    assert table is not None
    lines = visible_lines(bk.to_payload(message))
    thread = [table.text, *(table.code or "").splitlines()]
    body = (
        "# What the seed story's first message looks like\n\n"
        "Generated by `tests/integration/test_messages_seed.py` from the seed host's real\n"
        "diagnosis; do not edit by hand (the test rewrites it and fails when it changed).\n\n"
        "## Notification text (what a phone shows)\n\n```\n" + message.text + "\n```\n\n"
        "## Parent message in Slack (visible lines)\n\n```\n" + "\n".join(lines) + "\n```\n\n"
        "## First thread reply: the evidence\n\n```\n" + "\n".join(thread) + "\n```\n\n"
        "## The same in the terminal\n\n```\n"
        + "\n".join(line.rstrip() for line in terminal_text(
            message, ChatMessage(text=table.text, sections=(table,))).splitlines())
        + "\n```\n"
    )
    old = EXAMPLE.read_text() if EXAMPLE.exists() else ""
    if old != body:
        EXAMPLE.write_text(body)
    assert old == body, f"{EXAMPLE} was out of date and has been regenerated: commit it"


def test_raw_evidence_only_on_demand_fits_one_thread_reply(seed_diagnosis: Diagnosis) -> None:
    sections = raw_evidence(seed_diagnosis)
    message = ChatMessage(text="raw evidence", sections=sections)
    blocks = bk.to_blocks(message)
    assert len(blocks) <= 50 and all(len(b["text"]["text"]) <= 3000 for b in blocks)
    gpus = next(s for s in sections if s.text.startswith("*gpus*"))
    assert gpus.code is not None and "nvidia-smi" in gpus.code and "77600" in gpus.code
    assert "exit 0" in gpus.text
    first = bk.to_payload(first_message(seed_diagnosis))
    assert "nvidia-smi" not in json.dumps(first), "the parent message carries no raw output"
