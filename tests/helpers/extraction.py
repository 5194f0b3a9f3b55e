"""A reference run: the same spec, uninterrupted, to compare a resumed run against."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from redis import Redis


def reference(spec_out: Path, tmp_path: Path, conn: Redis, **overrides: Any) -> Path:
    """The same spec run uninterrupted into another directory."""
    from bot.extract.extractors import load_extractor
    from bot.extract.runner import Counters, Runner
    from bot.extract.spec import ExtractionSpec

    del conn
    spec = ExtractionSpec.model_validate({**overrides, "output_dir": str(tmp_path / "reference"),
                                   "fsync": False, "writers": 4})
    spec.output_dir.mkdir(parents=True, exist_ok=True)
    assert Runner(spec, load_extractor(spec), set(), Counters()).run().reason == "completed"
    return spec.output_dir
