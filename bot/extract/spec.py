"""The job spec: what to extract, from which dataset, into which directory, on which host.

Validated once at submit with one-line errors; the stored copy (JSON in the job record)
is what every run and retry reads, so a resume uses exactly the submitted settings.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import Field, ValidationError, field_validator, model_validator

from bot.core.errors import UserError
from bot.core.schema import StrictModel
from bot.domain.validate import valid_host

NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._ -]{0,79}$")
EXTRACTOR_RE = re.compile(r"^(builtin|transformers:.+|[A-Za-z_][\w.]*:[A-Za-z_]\w*)$")
Dtype = Literal["float32", "float16", "bfloat16"]


class BuiltinModel(StrictModel):
    """The seeded small transformer; hidden/layers scale it from demo size to 4096."""

    hidden: int = Field(64, ge=8, le=16384)
    layers: int = Field(4, ge=1, le=128)
    heads: int = Field(4, ge=1, le=128)
    vocab: int = Field(512, ge=260, le=1_000_000)
    ffn_mult: int = Field(4, ge=1, le=8)
    max_positions: int = Field(4096, ge=8, le=1_000_000)
    seed: int = 0

    @model_validator(mode="after")
    def _heads_divide(self) -> BuiltinModel:
        if self.hidden % self.heads:
            raise ValueError(f"hidden ({self.hidden}) must be a multiple of heads ({self.heads})")
        return self


class ExtractionSpec(StrictModel):
    name: str
    dataset: Path
    output_dir: Path
    host: str = "local"
    extractor: str = "builtin"
    model: BuiltinModel = Field(default_factory=lambda: BuiltinModel.model_validate({}))
    layers: Literal["eagle3", "all"] | list[int] = "eagle3"
    batch_size: int = Field(8, ge=1, le=4096)
    max_length: int = Field(2048, ge=1, le=1_000_000)
    truncate: bool = True  # False: a too-long sample fails (and is skipped after max_sample_tries)
    dtype: Dtype = "float32"
    device: str = "auto"
    threads: int | None = Field(None, ge=1, le=256)  # torch intra-op threads
    writers: int = Field(2, ge=0, le=64)  # 0: write in the compute loop (no overlap)
    fsync: bool = True
    group_window: int = Field(16, ge=1, le=4096)  # batches per length-sorting window
    max_sample_tries: int = Field(3, ge=1, le=100)
    retries: int = Field(3, ge=1, le=1000)  # RQ Retry(max=...) for crashed runs
    progress_interval_s: float = Field(2.0, ge=0.05, le=60)
    verify_window_s: float = Field(30.0, ge=0)
    verify_last: int = Field(256, ge=0)

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not NAME_RE.match(v):
            raise ValueError("letters, digits, space, '.', '_' or '-' (1-80 characters)")
        return v

    @field_validator("host")
    @classmethod
    def _host(cls, v: str) -> str:
        if not valid_host(v):
            raise ValueError("letters, digits, '.', '_', ':' or '-' (1-253 characters)")
        return v

    @field_validator("extractor")
    @classmethod
    def _extractor(cls, v: str) -> str:
        if not EXTRACTOR_RE.match(v):
            raise ValueError("must be 'builtin', 'transformers:PATH' or 'module:callable'")
        return v

    @field_validator("device")
    @classmethod
    def _device(cls, v: str) -> str:
        if not re.match(r"^(auto|cpu|cuda(:\d{1,2})?)$", v):
            raise ValueError("must be auto, cpu, cuda or cuda:N")
        return v

    @field_validator("layers")
    @classmethod
    def _layers(cls, v: Any) -> Any:
        if isinstance(v, list) and (not v or len(set(v)) != len(v) or min(v) < 0):
            raise ValueError("a non-empty list of distinct layer indexes >= 0 (0 = embeddings)")
        return v

    def to_json(self) -> str:
        return self.model_dump_json()


def eagle3_layers(num_layers: int) -> tuple[int, ...]:
    """EAGLE-3 drafter inputs: a low, a middle and a high layer, plus the last.

    Indexes count the embedding output as 0 (Hugging Face ``hidden_states`` order), so
    SpecForge's aux ids ``[1, n//2 - 1, n - 4]`` become ``2, n//2, n - 3`` here.
    """
    wanted = (2, num_layers // 2, num_layers - 3, num_layers)
    return tuple(sorted({min(max(i, 1), num_layers) for i in wanted}))


def resolve_layers(spec_layers: str | list[int], num_layers: int) -> tuple[int, ...]:
    """Layer indexes to capture; reject indexes the model does not have."""
    if spec_layers == "eagle3":
        return eagle3_layers(num_layers)
    if spec_layers == "all":
        return tuple(range(num_layers + 1))
    assert isinstance(spec_layers, list)
    bad = [i for i in spec_layers if i > num_layers]
    if bad:
        raise UserError(f"layers {bad} out of range: the model has layers 0..{num_layers}", 2)
    return tuple(sorted(spec_layers))


def _first_error(exc: ValidationError, where: str) -> UserError:
    err = exc.errors()[0]
    key = ".".join(str(p) for p in err["loc"]) or "(top level)"
    return UserError(f"{where}: key '{key}': {err['msg']}", 2)


def parse_spec(data: Any, where: str = "spec", base: Path | None = None) -> ExtractionSpec:
    """Validate a mapping; relative paths are taken relative to ``base`` (the spec's folder)."""
    if not isinstance(data, dict):
        raise UserError(f"{where}: top level must be a mapping, got {type(data).__name__}", 2)
    try:
        spec = ExtractionSpec(**data)
    except ValidationError as exc:
        raise _first_error(exc, where) from None
    if base is not None:
        spec.dataset = (base / spec.dataset).resolve()
        spec.output_dir = (base / spec.output_dir).resolve()
    return spec


def load_spec(path: str | Path) -> ExtractionSpec:
    """Read a YAML or JSON spec file; every problem is one line naming the file and key."""
    source = Path(path)
    try:
        text = source.read_text()
    except OSError as exc:
        raise UserError(f"{source}: cannot read spec: {exc.strerror}", 2) from None
    try:
        data = json.loads(text) if source.suffix == ".json" else yaml.safe_load(text)
    except json.JSONDecodeError as exc:
        raise UserError(f"{source}: not valid JSON (line {exc.lineno}): {exc.msg}", 2) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1})" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise UserError(f"{source}: not valid YAML{where}: {problem}", 2) from None
    return parse_spec(data, str(source), base=source.resolve().parent)


def spec_from_json(text: str) -> ExtractionSpec:
    """The stored copy: already validated at submit, paths already absolute."""
    return ExtractionSpec.model_validate_json(text)
