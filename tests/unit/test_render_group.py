"""A group parent's message lists the hosts that alerted together."""

from __future__ import annotations

from bot.chat.render import render_incident
from bot.domain.findings import Diagnosis, DiagnosisStatus
from bot.domain.incident import Incident


def test_parent_lists_its_hosts_and_caps_the_list() -> None:
    hosts = tuple(f"gpu-{i:02d}" for i in range(25))
    parent = Incident(id="INC-7", host="gpu-00", kind="vm_restart", hosts=hosts)
    message = render_incident(parent, Diagnosis("gpu-00", "vm_restart", DiagnosisStatus.OK, 0.4))
    text = message.sections[0].text
    assert "25 hosts alerted together" in text
    assert "gpu-19" in text and "gpu-20" not in text and "and 5 more" in text


def test_single_host_incident_has_no_group_line() -> None:
    single = Incident(id="INC-8", host="gpu-01", kind="vm_restart")
    message = render_incident(single, Diagnosis("gpu-01", "vm_restart", DiagnosisStatus.OK, 0.4))
    assert "alerted together" not in message.sections[0].text
