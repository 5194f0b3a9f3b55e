"""How much a disk_full cleanup must free: enough to get every full filesystem under the mark."""

from __future__ import annotations

from bot.domain.findings import Diagnosis, DiagnosisStatus, Finding, Severity
from bot.flow.cleanup_offer import need_bytes, proposal
from bot.remediation.cleanup import CleanupCandidate

T = 1024 ** 4


def _full(mount: str, used: int, avail: int) -> Finding:
    fs = {"device": "/dev/x", "fstype": "ext4", "size": used + avail, "used": used,
          "avail": avail, "mount": mount}
    return Finding("disk.full", Severity.CRITICAL, f"{mount} full", "", {"filesystem": fs})


def test_need_sums_each_full_filesystem_down_to_the_mark() -> None:
    diag = Diagnosis("gpu-01", "disk_full", DiagnosisStatus.OK, 0.1,
                     (_full("/data", 15 * T, 0), _full("/", 95, 5),
                      Finding("disk.ok", Severity.INFO, "ok", "", {})))
    assert need_bytes(diag, 90.0) == 15 * T - int(15 * T * 0.9) + 5
    assert need_bytes(Diagnosis("h", "disk_full", DiagnosisStatus.OK, 0.1), 90.0) == 0


def test_the_proposal_needs_no_more_than_its_items_hold() -> None:
    items = [CleanupCandidate("checkpoint", "/data/c/run/a", ("/data/c/run/a/x.pt",), 300, 0.0,
                              "root"),
             CleanupCandidate("core_dump", "/var/core.1", ("/var/core.1",), 50, 0.0, "root")]
    action = proposal("gpu-01", items, 10_000, now=86400.0)
    assert action.kind == "disk.cleanup"
    assert action.params == {"paths": "/data/c/run/a/x.pt|/var/core.1", "need_bytes": "350"}
    assert "/data/c/run/a" in action.reason and "2 cache" in action.reason
    assert proposal("gpu-01", items, 100, now=0.0).params["need_bytes"] == "100"
