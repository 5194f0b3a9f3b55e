"""The disk cleanup in chat words: the thread's preview table and each proposal's
sentence, rendered from the stored diagnosis alone (pure)."""

from __future__ import annotations

from bot.chat import cleanup_view
from bot.chat.render import IncidentHeader, render_incident
from bot.domain.findings import Diagnosis, DiagnosisStatus, Finding, Severity
from bot.domain.incident_record import ActionPlan
from bot.flow.cleanup_offer import parts, preview_finding, proposal
from bot.remediation.cleanup import CleanupCandidate

G = 1024 ** 3
DAY = 86400.0
ITEMS = [CleanupCandidate("checkpoint", "/data/checkpoints/run-a/step-1000",
                          ("/data/checkpoints/run-a/step-1000/model.pt",
                           "/data/checkpoints/run-a/step-1000/optim.pt"), 300 * G, 0.0, "ml"),
         CleanupCandidate("hf_cache", "/data/cache/huggingface/hub/m/blobs/5f", (
             "/data/cache/huggingface/hub/m/blobs/5f",), 140 * G, 50 * DAY, "root"),
         CleanupCandidate("core_dump", "/var/lib/systemd/coredump/core.x", (
             "/var/lib/systemd/coredump/core.x",), 50 * G, 57 * DAY, "root")]


def diagnosis() -> Diagnosis:
    full = Finding("disk.full", Severity.CRITICAL, "/data is full")
    actions = (proposal("gpu-01", ITEMS, 400 * G, 60 * DAY), *parts("gpu-01", ITEMS, 400 * G))
    return Diagnosis("gpu-01", "disk_full", DiagnosisStatus.OK, 0.1,
                     (full, preview_finding(ITEMS, 400 * G, 60 * DAY)), actions)


def test_the_table_ranks_items_with_size_age_owner_and_says_the_total_and_need() -> None:
    table = cleanup_view.table(diagnosis())
    assert table is not None and table.code is not None
    assert table.text == "*Cleanup preview:* 3 items, 490.0 GiB in all; 400.0 GiB needed"
    rows = table.code.splitlines()
    assert rows[0].split() == ["SIZE", "AGE", "OWNER", "CATEGORY", "PATH"]
    assert rows[1].split()[:4] == ["300.0", "GiB", "60", "d"]
    assert rows[1].endswith("/data/checkpoints/run-a/step-1000")
    assert "HF cache" in rows[2] and "10 d" in rows[2] and "core dump" in rows[3]


def test_sentences_say_how_many_items_and_how_much() -> None:
    diag = diagnosis()
    whole, *each = diag.actions
    assert cleanup_view.phrase(whole, diag) == (
        "delete 3 items (1 checkpoint, 1 HF cache, 1 core dump), freeing 490.0 GiB of the "
        "400.0 GiB needed")
    assert [cleanup_view.phrase(a, diag) for a in each] == [
        "delete only checkpoint step-1000: 1 item, 300.0 GiB",
        "delete only HF cache 5f: 1 item, 140.0 GiB",
        "delete only core dump core.x: 1 item, 50.0 GiB"]


def test_a_plan_says_what_it_keeps_and_how_short_it_falls() -> None:
    kept = {"/data/checkpoints/run-a": ["/data/checkpoints/run-a/step-3000",
                                        "/data/checkpoints/run-a/step-2000"]}
    short = Diagnosis("gpu-01", "disk_full", DiagnosisStatus.OK, 0.1, (
        Finding("disk.full", Severity.CRITICAL, "/data is full"),
        preview_finding(ITEMS[2:], 400 * G, 60 * DAY, kept)),
        (proposal("gpu-01", ITEMS[2:], 400 * G, 60 * DAY),))
    assert cleanup_view.phrase(short.actions[0], short) == (
        "delete 1 item (1 core dump), freeing 50.0 GiB of the 400.0 GiB needed (350.0 GiB "
        "short: the disk stays full); keeps the newest 2 checkpoints of each run (run-a: "
        "step-3000, step-2000)")


def test_an_hf_cache_item_is_named_by_its_model_not_its_blob() -> None:
    item = {"label": "/data/hf/hub/models--meta-llama--Llama-3.1-70B/blobs/3c1d", "size": 1,
            "category": "hf_cache"}
    assert cleanup_view.part_name([item]) == "HF cache meta-llama--Llama-3.1-70B"


def test_the_parts_share_one_row_of_approve_buttons() -> None:
    diag = diagnosis()
    plans = [ActionPlan(a, ("rm -f -- x",), f"ap-{i}") for i, a in enumerate(diag.actions)]
    header = IncidentHeader("INC-1", "gpu-01", "disk_full", "critical", "awaiting_approval",
                            first_seen=60 * DAY)
    message = render_incident(header, diag, plans, now=61 * DAY)
    rows = [s for s in message.sections if s.buttons]
    assert [b.label for b in rows[0].buttons] == ["Approve", "Deny"]
    assert [(b.label, b.value) for b in rows[1].buttons] == [
        ("checkpoint step-1000 · 300.0 GiB", "ap-1"), ("HF cache 5f · 140.0 GiB", "ap-2"),
        ("core dump core.x · 50.0 GiB", "ap-3")]
    assert all(b.action_id == "approve" and b.confirm for b in rows[1].buttons)
    assert len(rows) == 2
