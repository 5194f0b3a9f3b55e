"""Extractors turn token ids into per-sample hidden states of the chosen layers.

``builtin`` (the seeded small transformer), ``transformers:PATH`` (a local Hugging Face
model, offline, ``output_hidden_states``) and ``module:callable`` (a factory taking the
ExtractionSpec and returning anything with this interface).
"""

from __future__ import annotations

import importlib
from typing import Any, Protocol

import torch

from bot.core.errors import UserError
from bot.extract.dataset import Record
from bot.extract.model import build_model, byte_tokens
from bot.extract.spec import ExtractionSpec, resolve_layers

DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}


class Extractor(Protocol):
    layers: tuple[int, ...]
    hidden_size: int

    def tokenize(self, record: Record) -> tuple[int, ...]: ...

    def forward(self, batch: list[tuple[int, ...]]) -> list[torch.Tensor]:
        """One tensor per sample, shaped (len(layers), len(tokens), hidden_size)."""
        ...


def pick_device(name: str) -> torch.device:
    """``auto`` is CUDA when present; an explicit CUDA request without one is a user error."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise UserError(f"device {name} requested but CUDA is not available here", 2)
    return torch.device(name)


def _pad(batch: list[tuple[int, ...]], device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    width = max(len(t) for t in batch)
    ids = torch.zeros((len(batch), width), dtype=torch.long)
    mask = torch.zeros((len(batch), width), dtype=torch.long)
    for row, tokens in enumerate(batch):
        ids[row, : len(tokens)] = torch.tensor(tokens, dtype=torch.long)
        mask[row, : len(tokens)] = 1
    return ids.to(device), mask.to(device)


def _split(
    states: list[torch.Tensor] | tuple[torch.Tensor, ...],
    layers: tuple[int, ...],
    batch: list[tuple[int, ...]],
) -> list[torch.Tensor]:
    stacked = torch.stack([states[i] for i in layers], dim=1)  # (B, n_layers, T, H)
    return [stacked[row, :, : len(tokens)] for row, tokens in enumerate(batch)]


class BuiltinExtractor:
    def __init__(self, spec: ExtractionSpec) -> None:
        self.device = pick_device(spec.device)
        compute = DTYPES[spec.dtype] if self.device.type == "cuda" else torch.float32
        self.cfg = spec.model
        self.model = build_model(spec.model, self.device, compute)
        self.layers = resolve_layers(spec.layers, spec.model.layers)
        self.hidden_size = spec.model.hidden
        self.max_length = spec.max_length
        self.truncate = spec.truncate

    def tokenize(self, record: Record) -> tuple[int, ...]:
        tokens = record.input_ids or byte_tokens(record.text or "", self.cfg.vocab)
        tokens = tuple(t % self.cfg.vocab for t in tokens)
        return tokens[: self.max_length] if self.truncate else tokens

    def forward(self, batch: list[tuple[int, ...]]) -> list[torch.Tensor]:
        ids, _ = _pad(batch, self.device)
        return _split(self.model(ids), self.layers, batch)


class TransformersExtractor:
    """A local Hugging Face model; never touches the network (``local_files_only``)."""

    def __init__(self, spec: ExtractionSpec, path: str) -> None:
        from transformers import AutoModel, AutoTokenizer

        self.device = pick_device(spec.device)
        compute = DTYPES[spec.dtype] if self.device.type == "cuda" else torch.float32
        try:
            self.tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
            model = AutoModel.from_pretrained(path, local_files_only=True, torch_dtype=compute)
        except (OSError, ValueError) as exc:
            raise UserError(f"transformers model {path}: {str(exc).splitlines()[0]}", 2) from None
        self.model = model.to(self.device).eval()
        self.layers = resolve_layers(spec.layers, int(model.config.num_hidden_layers))
        self.hidden_size = int(model.config.hidden_size)
        self.max_length = spec.max_length
        self.truncate = spec.truncate

    def tokenize(self, record: Record) -> tuple[int, ...]:
        if record.input_ids is not None:
            tokens = record.input_ids
        else:
            tokens = tuple(self.tokenizer(record.text or "", add_special_tokens=True)["input_ids"])
        return tokens[: self.max_length] if self.truncate else tokens

    def forward(self, batch: list[tuple[int, ...]]) -> list[torch.Tensor]:
        ids, mask = _pad(batch, self.device)
        out = self.model(input_ids=ids, attention_mask=mask, output_hidden_states=True)
        return _split(out.hidden_states, self.layers, batch)


def _from_callable(spec: ExtractionSpec) -> Extractor:
    module_name, _, attr = spec.extractor.partition(":")
    try:
        factory: Any = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as exc:
        raise UserError(f"extractor {spec.extractor}: cannot import: {exc}", 2) from None
    extractor: Extractor = factory(spec)
    return extractor


def load_extractor(spec: ExtractionSpec) -> Extractor:
    """Build the extractor a spec names (at job start, in the work horse)."""
    if spec.extractor == "builtin":
        return BuiltinExtractor(spec)
    if spec.extractor.startswith("transformers:"):
        return TransformersExtractor(spec, spec.extractor.partition(":")[2])
    return _from_callable(spec)
