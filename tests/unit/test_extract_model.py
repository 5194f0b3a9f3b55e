"""The built-in seeded transformer: reproducible, causal, EAGLE-3 layer capture."""

from __future__ import annotations

from pathlib import Path

import torch

from bot.extract.dataset import Record
from bot.extract.extractors import BuiltinExtractor, pick_device
from bot.extract.model import build_model, byte_tokens
from bot.extract.spec import BuiltinModel
from tests.fixtures.extract import make_spec


def test_same_seed_same_weights_other_seed_differs() -> None:
    cfg = BuiltinModel.model_validate({"hidden": 16, "layers": 2, "heads": 2})
    a = build_model(cfg, torch.device("cpu"), torch.float32)
    b = build_model(cfg, torch.device("cpu"), torch.float32)
    c = build_model(cfg.model_copy(update={"seed": 1}), torch.device("cpu"), torch.float32)
    for (name, pa), pb in zip(a.state_dict().items(), b.state_dict().values(), strict=True):
        assert torch.equal(pa, pb), name
    assert not all(
        torch.equal(pa, pc) for pa, pc in zip(a.parameters(), c.parameters(), strict=True)
    )


def test_global_rng_is_left_alone() -> None:
    torch.manual_seed(123)
    expected = torch.rand(1)
    torch.manual_seed(123)
    build_model(BuiltinModel.model_validate({}), torch.device("cpu"), torch.float32)
    assert torch.equal(torch.rand(1), expected)


def test_extractor_shapes_layers_and_padding_independence(tmp_path: Path) -> None:
    spec = make_spec(tmp_path, model={"hidden": 32, "layers": 6, "heads": 4})
    ex = BuiltinExtractor(spec)
    assert ex.layers == (2, 3, 6) and ex.hidden_size == 32
    short, long = (
        ex.tokenize(Record("a", text="gpu")),
        ex.tokenize(Record("b", text="vram held idle")),
    )
    assert short == byte_tokens("gpu", 512)
    with torch.inference_mode():
        batched = ex.forward([short, long])
        alone = ex.forward([short])
    assert batched[0].shape == (3, len(short), 32) and batched[1].shape == (3, len(long), 32)
    # causal: right padding never changes a real token's states
    assert torch.allclose(batched[0], alone[0], atol=1e-5)


def test_truncation_to_max_length(tmp_path: Path) -> None:
    spec = make_spec(tmp_path, max_length=4)
    assert len(BuiltinExtractor(spec).tokenize(Record("a", input_ids=tuple(range(10))))) == 4


def test_auto_device_is_cpu_without_cuda() -> None:
    assert pick_device("auto").type == ("cuda" if torch.cuda.is_available() else "cpu")
