"""Runbook links: config validation, the pure lookup, the link button in the message."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.chat import blockkit as bk
from bot.chat.render import render_incident
from bot.config.settings import load_settings
from bot.core.errors import ConfigError
from bot.domain.findings import Diagnosis, DiagnosisStatus, Finding, Severity
from bot.domain.incident import Incident
from bot.domain.runbooks import runbook_for, runbook_links

BOOKS = {"gpu.xid": "https://wiki.example/xid", "gpu": "https://wiki.example/gpu",
         "disk.full": "https://wiki.example/disk"}


def _diag(*codes: tuple[str, Severity]) -> Diagnosis:
    return Diagnosis("gpu-01", "triage", DiagnosisStatus.OK, 0.1,
                     findings=tuple(Finding(c, s, f"title of {c}") for c, s in codes))


def test_a_code_falls_back_to_its_dotted_parents() -> None:
    assert runbook_for("gpu.xid", BOOKS) == "https://wiki.example/xid"
    assert runbook_for("gpu.xid.79", BOOKS) == "https://wiki.example/xid"
    assert runbook_for("gpu.ecc", BOOKS) == "https://wiki.example/gpu"
    assert runbook_for("boot.previous", BOOKS) is None


def test_links_skip_info_findings_and_repeat_urls() -> None:
    diag = _diag(("gpu.xid", Severity.CRITICAL), ("gpu.xid.79", Severity.WARNING),
                 ("disk.full", Severity.INFO), ("gpu.ecc", Severity.WARNING))
    assert [(link.code, link.url) for link in runbook_links(diag, BOOKS)] == [
        ("gpu.xid", "https://wiki.example/xid"), ("gpu.ecc", "https://wiki.example/gpu")]
    assert runbook_links(diag, {}) == ()


def test_the_message_carries_a_link_button_slack_accepts() -> None:
    incident = Incident("INC-4", "gpu-01", "gpu_xid", severity=Severity.CRITICAL)
    message = render_incident(incident, _diag(("gpu.xid", Severity.CRITICAL)), runbooks=BOOKS)
    (button,) = [b for b in message.buttons if b.action_id == "runbook"]
    assert button.label == "Runbook: gpu.xid" and button.url == "https://wiki.example/xid"
    elements = [e for b in bk.to_blocks(message) if b["type"] == "actions" for e in b["elements"]]
    (el,) = [e for e in elements if e["action_id"] == "runbook"]
    assert el["url"] == "https://wiki.example/xid" and el["value"] == "gpu.xid"
    plain = render_incident(incident, _diag(("gpu.xid", Severity.CRITICAL)))
    assert not [b for b in plain.buttons if b.action_id == "runbook"]


@pytest.mark.parametrize(("yaml", "reason"), [
    ("runbooks: {gpu.xid: 'javascript:alert(1)'}", "must be an http(s) URL"),
    ("runbooks: {gpu.xid: 'wiki.example/xid'}", "must be an http(s) URL"),
    ("runbooks: {'GPU XID': 'https://wiki.example'}", "is not a finding code"),
    (f"runbooks: {{gpu.xid: 'https://w.example/{'a' * 3000}'}}", "over 3000 characters"),
])
def test_a_bad_runbook_stops_start_with_the_key_and_reason(tmp_path: Path, yaml: str,
                                                           reason: str) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(yaml + "\n")
    with pytest.raises(ConfigError, match="key 'runbooks'") as err:
        load_settings(path)
    assert reason in str(err.value)


def test_good_runbooks_load(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("runbooks: {gpu.xid: 'https://wiki.example/xid', disk: 'http://w/d'}\n")
    assert load_settings(path).runbooks == {"gpu.xid": "https://wiki.example/xid",
                                            "disk": "http://w/d"}
