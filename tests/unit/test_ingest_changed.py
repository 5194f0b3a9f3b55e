"""A storm write sends only the incident fields that changed, exactly the ones a diff of
both sides' ``to_hash()`` finds, serialised as ``to_hash`` writes them."""

from __future__ import annotations

from dataclasses import replace

import pytest

from bot.domain.findings import Diagnosis, DiagnosisStatus
from bot.domain.incident import Incident, IncidentState
from storage.ingest import _changed

BEFORE = Incident(id="INC-7", host="gpu-01", kind="gpu_idle_vram", summary="held", count=3,
                  first_seen=100.0, last_seen=130.5, updated=130.5, source="alertmanager",
                  hosts=("gpu-01",), fingerprints=("am:a1", "am:b2"),
                  labels={"alertname": "GpuIdleVram", "gpu": "0"},
                  details={"starts_at": "2026-01-01T00:00:00Z", "annotations": {"x": "1"}},
                  diagnosis=Diagnosis("gpu-01", "vram_idle", DiagnosisStatus.OK, 0.2))

AFTER = [
    replace(BEFORE),  # nothing changed
    replace(BEFORE, count=4, last_seen=140.25, updated=140.25),  # a fold
    replace(BEFORE, fingerprints=("am:a1", "am:b2", "am:c3"), count=4),
    replace(BEFORE, labels={"alertname": "GpuIdleVram", "gpu": "1"}),
    replace(BEFORE, details={"starts_at": "2026-01-01T00:00:00Z", "annotations": {"x": "2"}}),
    replace(BEFORE, state=IncidentState.RESOLVED, resolved_at=150.0),
    replace(BEFORE, parent_id="INC-1", hosts=("gpu-01", "gpu-02")),
    replace(BEFORE, summary="", diagnosis=None),
]


@pytest.mark.parametrize("after", AFTER)
def test_same_fields_and_text_as_diffing_both_hashes(after: Incident) -> None:
    old = BEFORE.to_hash()
    expected = {k: v for k, v in after.to_hash().items() if old.get(k) != v}
    assert _changed(BEFORE, after) == expected


def test_a_fold_writes_only_its_count_and_times() -> None:
    fold = replace(BEFORE, count=4, last_seen=140.25, updated=140.25)
    assert _changed(BEFORE, fold) == {"count": "4", "last_seen": "140.25", "updated": "140.25"}
