"""A proposal the catalog refuses is dropped with an info finding, never an exception."""

from __future__ import annotations

from bot.domain.findings import Diagnosis, DiagnosisStatus, ProposedAction, Severity
from bot.remediation.proposals import REFUSED_CODE, plannable
from bot.ssh.base import SSHTarget

TARGET = SSHTarget(name="gpu-01", host="10.0.0.1", user="root")


def test_a_refused_proposal_becomes_an_info_finding_and_the_rest_stay() -> None:
    good = ProposedAction("a", "disk.cleanup", {"paths": "/root/.cache/x/y", "need_bytes": "1"},
                          "delete", "-")
    bad = ProposedAction("b", "disk.cleanup", {"paths": "/data/../etc/passwd"}, "delete", "-")
    diag = Diagnosis("gpu-01", "disk_full", DiagnosisStatus.OK, 0.1, (), (good, bad))
    out = plannable(diag, TARGET)
    assert out.actions == (good,)
    note = out.findings[-1]
    assert note.code == REFUSED_CODE and note.severity is Severity.INFO
    assert note.title.startswith("not proposed: disk.cleanup (refused disk.cleanup: ")
    assert plannable(Diagnosis("h", "x", DiagnosisStatus.OK, 0.1, (), (good,)), TARGET).actions \
        == (good,)
