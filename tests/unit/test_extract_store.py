"""Atomic per-sample files, the resume scan, the writer pool and the run loop (no Redis)."""

from __future__ import annotations

import errno
import os
import time
from pathlib import Path

import pytest
import torch

from bot.extract.extractors import BuiltinExtractor
from bot.extract.runner import Counters, Hooks, LocalFailures, Runner
from bot.extract.store import Expect, Payload, payload, sample_path, save_atomic, scan, verify_file
from bot.extract.writer import WriterPool
from tests.fixtures.extract import assert_same_outputs, load_all, make_spec

EXPECT = Expect(n_layers=2, hidden=4, dtype=torch.float32)


def _obj(sid: str, length: int = 3) -> Payload:
    return payload(sid, tuple(range(length)), torch.randn(2, length, 4), (1, 2))


def test_save_atomic_leaves_only_the_final_file(tmp_path: Path) -> None:
    size = save_atomic(_obj("a"), sample_path(tmp_path, "a"))
    assert os.listdir(tmp_path) == ["a.pt"]
    assert size == (tmp_path / "a.pt").stat().st_size
    assert verify_file(tmp_path / "a.pt", EXPECT) is None


def test_save_atomic_failure_leaves_nothing(tmp_path: Path) -> None:
    target = tmp_path / "missing-dir" / "a.pt"
    with pytest.raises(OSError):
        save_atomic(_obj("a"), target)
    assert os.listdir(tmp_path) == []


def test_verify_rejects_truncated_wrong_id_and_wrong_shape(tmp_path: Path) -> None:
    save_atomic(_obj("a"), tmp_path / "a.pt")
    data = (tmp_path / "a.pt").read_bytes()
    (tmp_path / "b.pt").write_bytes(data[: len(data) // 2])
    assert "does not load" in (verify_file(tmp_path / "b.pt", EXPECT) or "")
    (tmp_path / "c.pt").write_bytes(data)
    assert verify_file(tmp_path / "c.pt", EXPECT) == "wrong content or id"
    save_atomic(_obj("d"), tmp_path / "d.pt")
    assert "expected (3, 3, 4)" in (
        verify_file(tmp_path / "d.pt", Expect(3, 4, torch.float32)) or ""
    )
    assert "torch.float16" in (verify_file(tmp_path / "d.pt", Expect(2, 4, torch.float16)) or "")


def test_scan_removes_temp_files_and_recent_corrupt_ones_only(tmp_path: Path) -> None:
    old = time.time() - 3600
    for i in range(40):
        save_atomic(_obj(f"s{i}"), tmp_path / f"s{i}.pt")
        os.utime(tmp_path / f"s{i}.pt", (old + i, old + i))
    (tmp_path / "s5.pt").write_bytes(b"")  # empty: always caught
    os.utime(tmp_path / "s5.pt", (old, old))
    good = (tmp_path / "s39.pt").read_bytes()
    (tmp_path / "s40.pt").write_bytes(good[:100])  # the crash's cut-short file: the newest
    (tmp_path / ".s41.pt.123-4.tmp").write_bytes(b"half")
    (tmp_path / "notes.txt").write_text("ignored")
    report = scan(tmp_path, EXPECT, window_s=30, last_n=3)
    assert report.partial_removed == 1
    assert sorted(report.corrupt_removed) == ["s40", "s5"]
    assert report.verified == 4  # s40, s39, s38 (newest three) and the empty s5
    assert len(report.done) == 39 and "s40" not in report.done and "s5" not in report.done
    assert not (tmp_path / "s40.pt").exists() and not (tmp_path / ".s41.pt.123-4.tmp").exists()


def test_scan_creates_missing_output_dir(tmp_path: Path) -> None:
    report = scan(tmp_path / "new", EXPECT)
    assert (tmp_path / "new").is_dir() and report.files == 0


def test_writer_pool_stops_at_the_first_enospc(tmp_path: Path) -> None:
    calls: list[str] = []

    def save(obj: Payload, path: Path, fsync: bool) -> int:
        calls.append(obj["id"])
        if len(calls) > 3:
            raise OSError(errno.ENOSPC, "No space left on device")
        return save_atomic(obj, path, fsync)

    counters = Counters()
    pool = WriterPool(tmp_path, threads=1, capacity=2, on_written=counters.written, save=save)
    for i in range(10):
        pool.submit(f"s{i}", _obj(f"s{i}"))
    pool.close()
    assert isinstance(pool.error, OSError) and pool.error.errno == errno.ENOSPC
    assert counters.done == 3 and len(calls) == 4  # nothing after the failure is attempted
    assert sorted(os.listdir(tmp_path)) == ["s0.pt", "s1.pt", "s2.pt"]


def test_runner_overlapped_equals_sequential_and_disk_full_pauses(tmp_path: Path) -> None:
    seq = make_spec(tmp_path, n=40, out="seq", writers=0)
    par = make_spec(tmp_path, n=40, out="par", writers=3)
    for spec in (seq, par):
        spec.output_dir.mkdir()
        outcome = Runner(spec, BuiltinExtractor(spec), set(), Counters()).run()
        assert outcome.reason == "completed"
    assert_same_outputs(par.output_dir, seq.output_dir)
    full = make_spec(tmp_path, n=40, out="full")
    full.output_dir.mkdir()
    budget = [12]

    def save(obj: Payload, path: Path, fsync: bool) -> int:
        budget[0] -= 1
        if budget[0] < 0:
            raise OSError(errno.ENOSPC, "No space left on device")
        return save_atomic(obj, path, fsync)

    outcome = Runner(full, BuiltinExtractor(full), set(), Counters(), save=save).run()
    assert outcome.reason == "disk_full" and outcome.detail.endswith(".pt")
    assert len(load_all(full.output_dir)) == 12


def test_a_sample_that_always_fails_is_skipped_after_n_tries(tmp_path: Path) -> None:
    spec = make_spec(
        tmp_path,
        n=20,
        truncate=False,
        max_sample_tries=3,
        model={"hidden": 32, "layers": 2, "heads": 4, "max_positions": 512},
    )
    with spec.dataset.open("a") as handle:
        handle.write('{"id": "too-long", "input_ids": [' + ", ".join(["5"] * 600) + "]}\n")
    spec.output_dir.mkdir()
    failures = LocalFailures(3)
    seen: list[tuple[str, int]] = []
    hooks = Hooks(on_failure=lambda sid, tries, err: seen.append((sid, tries)))
    outcome = Runner(spec, BuiltinExtractor(spec), set(), Counters(), hooks, failures).run()
    assert outcome.reason == "completed"
    assert seen == [("too-long", 1), ("too-long", 2), ("too-long", 3)]
    assert len(load_all(spec.output_dir)) == 20 and "too-long" not in load_all(spec.output_dir)


def test_stop_request_ends_the_run_between_batches(tmp_path: Path) -> None:
    spec = make_spec(tmp_path, n=40)
    spec.output_dir.mkdir()
    counters = Counters()
    hooks = Hooks(stop_requested=lambda: "pause" if counters.done >= 8 else None)
    outcome = Runner(spec, BuiltinExtractor(spec), set(), counters, hooks).run()
    assert outcome.reason == "pause"
    assert 8 <= counters.done < 40
