"""The seed story's extraction, 49% done, as the crash left it (for ``incident-bot demo``).

Writes a small JSONL dataset and a job spec, runs the real built-in extractor over the
first part of the plan, then leaves what a crash mid-write leaves: one half-written
temporary file, and one corrupt ``.pt`` (renamed, but its data cut short: what a file
system that lost its tail, or an older non-atomic writer, produces). Resuming it
reports "resumed at …; 1 partial file removed, 1 corrupt file recomputed".
"""

from __future__ import annotations

import json
import os
import random
import time
from pathlib import Path

import yaml

from bot.extract.extractors import BuiltinExtractor
from bot.extract.runner import Counters, Hooks, Runner
from bot.extract.spec import parse_spec
from bot.extract.store import sample_path

WORDS = (
    "gpu",
    "memory",
    "kernel",
    "tensor",
    "layer",
    "token",
    "batch",
    "disk",
    "queue",
    "restart",
    "hidden",
    "state",
    "extract",
    "resume",
    "vram",
    "driver",
    "node",
    "shard",
    "cache",
    "epoch",
)


def write_dataset(path: Path, samples: int, seed: int) -> None:
    rng = random.Random(seed)
    with path.open("w", encoding="utf-8") as handle:
        for i in range(samples):
            text = " ".join(rng.choice(WORDS) for _ in range(rng.randint(4, 40)))
            handle.write(json.dumps({"id": f"sample-{i:06d}", "text": text}) + "\n")


def demo_spec(workdir: Path, seed: int) -> dict[str, object]:
    """Small enough that the remaining half finishes in seconds on two CPU cores."""
    return {
        "name": "hidden-states-demo",
        "dataset": "dataset.jsonl",
        "output_dir": "out",
        "host": "gpu-01",
        "extractor": "builtin",
        "batch_size": 8,
        "max_length": 256,
        "model": {"hidden": 64, "layers": 4, "heads": 4, "seed": seed},
        "progress_interval_s": 0.5,
        "writers": 2,
        "retries": 3,
    }


def _crash_leftovers(out: Path, last_id: str, next_id: str) -> None:
    """A half-written temp file for the next sample and a cut-short final file."""
    final = sample_path(out, last_id)
    data = final.read_bytes()
    (out / f".{next_id}.pt.{os.getpid()}-1{'.tmp'}").write_bytes(data[: len(data) // 3])
    final.write_bytes(data[: len(data) // 2])
    now = time.time()
    os.utime(final, (now, now))


def prepare_interrupted_run(
    workdir: Path, *, samples: int = 200, done_fraction: float = 0.49, seed: int = 0
) -> Path:
    """Create the interrupted run under ``workdir``; return the spec file's path."""
    if samples < 4 or not 0.0 < done_fraction < 1.0:
        raise ValueError("need at least 4 samples and 0 < done_fraction < 1")
    workdir.mkdir(parents=True, exist_ok=True)
    write_dataset(workdir / "dataset.jsonl", samples, seed)
    spec_path = workdir / "extract.yaml"
    spec_path.write_text(yaml.safe_dump(demo_spec(workdir, seed), sort_keys=False))
    spec = parse_spec(demo_spec(workdir, seed), str(spec_path), base=workdir)
    spec.output_dir.mkdir(parents=True, exist_ok=True)
    counters = Counters()
    target = max(2, int(samples * done_fraction))
    hooks = Hooks(stop_requested=lambda: "pause" if counters.done >= target else None)
    Runner(
        spec.model_copy(update={"writers": 0}), BuiltinExtractor(spec), set(), counters, hooks
    ).run()
    files = sorted(spec.output_dir.glob("*.pt"), key=lambda p: p.stat().st_mtime_ns)
    done = {p.name[:-3] for p in files}
    _crash_leftovers(spec.output_dir, files[-1].name[:-3], _next_pending(spec.dataset, done))
    return spec_path


def _next_pending(dataset: Path, done: set[str]) -> str:
    with dataset.open(encoding="utf-8") as handle:
        for line in handle:
            sample_id = str(json.loads(line)["id"])
            if sample_id not in done:
                return sample_id
    raise ValueError("every sample is done; lower done_fraction")
