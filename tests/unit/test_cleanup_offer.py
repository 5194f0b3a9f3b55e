"""How much a disk_full cleanup must free: enough to get every full filesystem under the mark."""

from __future__ import annotations

from bot.domain.findings import Diagnosis, DiagnosisStatus, Finding, Severity
from bot.flow.cleanup_offer import (
    PART_PREFIX,
    groups,
    need_bytes,
    on_mount,
    parts,
    preview_finding,
    proposal,
    rest,
    search_roots,
    target_mount,
)
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


def test_the_proposal_needs_what_its_mount_needs_even_when_its_items_hold_less() -> None:
    items = [CleanupCandidate("checkpoint", "/data/c/run/a", ("/data/c/run/a/x.pt",), 300, 0.0,
                              "root"),
             CleanupCandidate("core_dump", "/data/core.1", ("/data/core.1",), 50, 0.0, "root")]
    where = {"mount": "/data", "full_pct": "90"}
    action = proposal("gpu-01", items, 10_000, now=86400.0, where=where)
    assert action.kind == "disk.cleanup"
    assert action.params == {"paths": "/data/c/run/a/x.pt|/data/core.1", "need_bytes": "10000",
                             "mount": "/data", "full_pct": "90"}
    assert "/data/c/run/a" in action.reason and "2 cache" in action.reason


def test_the_cleanup_targets_the_alerted_mount_else_the_one_needing_most() -> None:
    diag = Diagnosis("gpu-01", "disk_full", DiagnosisStatus.OK, 0.1,
                     (_full("/data", 15 * T, 0), _full("/", 95, 5)))
    assert target_mount(diag, 90.0) == ("/data", 15 * T - int(15 * T * 0.9))
    assert target_mount(diag, 90.0, "/") == ("/", 5)
    assert target_mount(diag, 90.0, "/scratch") == ("", 0)  # the alerted one is not full


def test_the_search_stays_on_the_alerted_mount() -> None:
    mounts = ["/", "/data", "/dev/shm"]
    allowed = ["/data", "/shared", "/var", "/root/.cache"]
    assert search_roots("/data", allowed, mounts) == ["/data"]
    assert search_roots("/", allowed, mounts) == ["/root/.cache", "/shared", "/var"]
    assert search_roots("/data", ["/"], mounts) == ["/data"]
    assert search_roots("/data", ["/data/cache"], mounts) == ["/data/cache"]
    assert search_roots("/dev/shm", allowed, mounts) == []
    files = [_item("hf_cache", "/data/hf/hub/a", 1), _item("core_dump", "/var/core.1", 1)]
    assert [c.label for c in on_mount(files, "/", mounts)] == ["/var/core.1"]


def _item(cat: str, path: str, size: int) -> CleanupCandidate:
    return CleanupCandidate(cat, path, (path,), size, 0.0, "root")


def test_parts_are_one_per_category_largest_first_or_one_per_item_when_few() -> None:
    hf, ck, core = (_item("hf_cache", "/data/hf/hub/a", 10), _item("checkpoint", "/data/c/r/s", 30),
                    _item("core_dump", "/var/core.1", 5))
    hf2 = _item("hf_cache", "/data/hf/hub/b", 25)
    assert [[c.label for c in g] for g in groups([hf, ck, core, hf2])] == [
        ["/data/hf/hub/a", "/data/hf/hub/b"], ["/data/c/r/s"], ["/var/core.1"]]
    assert groups([hf, hf2]) == [[hf], [hf2]]  # one kind, few items: one part each
    assert groups([hf]) == []  # the one part would be the whole proposal
    assert groups([_item("hf_cache", f"/data/hf/hub/{i}", 1) for i in range(4)]) == []
    made = parts("gpu-01", [hf, ck, hf2], need=20)
    assert [p.params for p in made] == [
        {"paths": "/data/hf/hub/a|/data/hf/hub/b", "need_bytes": "20"},
        {"paths": "/data/c/r/s", "need_bytes": "20"}]
    assert all(p.id.startswith(PART_PREFIX) for p in made)


def test_the_preview_finding_keeps_what_the_thread_table_needs() -> None:
    found = preview_finding([_item("checkpoint", "/data/c/r/s", 3 * T)], need=T, now=86400.0)
    assert found.code == "disk.cleanup_candidates" and found.severity is Severity.INFO
    assert found.evidence["total_bytes"] == 3 * T and found.evidence["need_bytes"] == T
    assert found.evidence["items"] == [{"label": "/data/c/r/s", "category": "checkpoint",
                                        "size": 3 * T, "age_s": 86400, "owner": "root",
                                        "paths": ["/data/c/r/s"]}]


def test_the_rest_is_the_parts_that_share_no_file_with_what_was_deleted() -> None:
    hf, ck, core = (_item("hf_cache", "/data/hf/hub/a", 10), _item("checkpoint", "/data/c/r/s", 30),
                    _item("core_dump", "/var/core.1", 5))
    whole = proposal("gpu-01", [ck, hf, core], 40, now=0.0)
    diag = Diagnosis("gpu-01", "disk_full", DiagnosisStatus.OK, 0.1, (),
                     (whole, *parts("gpu-01", [ck, hf, core], 40)))
    assert [a.params["paths"] for a in rest(diag, "/data/hf/hub/a")] == [
        "/data/c/r/s", "/var/core.1"]
    assert rest(diag, whole.params["paths"]) == []  # all of it went: nothing left to offer
