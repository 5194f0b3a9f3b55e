"""The compute/write pipeline of one run, free of Redis and RQ (they sit behind hooks).

Batches come from the fixed plan; a batch with any sample still to do is computed
whole (same neighbours, same padding as an uninterrupted run), under
``torch.inference_mode()``, and its missing samples go to the writer pool. A batch that
raises is retried one sample at a time, so one bad sample cannot sink its neighbours.
"""

from __future__ import annotations

import errno
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

import torch

from bot.extract.dataset import Item, plan_batches
from bot.extract.extractors import DTYPES, Extractor
from bot.extract.spec import ExtractionSpec
from bot.extract.store import SaveFn, payload, save_atomic
from bot.extract.writer import WriterPool

DISK_FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})


@dataclass
class Counters:
    """Shared by the compute loop, the writer threads and the reporter thread."""

    done: int = 0
    bytes_written: int = 0
    computed: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def written(self, _sample_id: str, size: int) -> None:
        with self.lock:
            self.done += 1
            self.bytes_written += size

    def snapshot(self) -> tuple[int, int, int]:
        with self.lock:
            return self.done, self.bytes_written, self.computed


@dataclass(frozen=True)
class RunOutcome:
    reason: str  # completed | pause | cancel | disk_full
    detail: str = ""


class Failures(Protocol):
    def exhausted(self, sample_id: str) -> bool: ...

    def record(self, sample_id: str, error: str) -> int: ...


@dataclass
class LocalFailures:
    """In-memory tries per sample (benchmarks, unit tests); the job uses Redis's book."""

    max_tries: int = 3
    tries: dict[str, int] = field(default_factory=dict)

    def exhausted(self, sample_id: str) -> bool:
        return self.tries.get(sample_id, 0) >= self.max_tries

    def record(self, sample_id: str, error: str) -> int:
        self.tries[sample_id] = self.tries.get(sample_id, 0) + 1
        return self.tries[sample_id]


@dataclass
class Hooks:
    """Where the run reports; defaults do nothing (benchmarks, unit tests)."""

    stop_requested: Callable[[], str | None] = lambda: None
    on_computed: Callable[[int], object] = lambda n: None
    on_failure: Callable[[str, int, str], None] = lambda sid, tries, err: None


class Runner:
    def __init__(
        self,
        spec: ExtractionSpec,
        extractor: Extractor,
        done: set[str],
        counters: Counters,
        hooks: Hooks | None = None,
        failures: Failures | None = None,
        save: SaveFn = save_atomic,
    ) -> None:
        self.spec, self.extractor, self.done, self.counters = spec, extractor, done, counters
        self.hooks = hooks or Hooks()
        self.failures = failures or LocalFailures(spec.max_sample_tries)
        self.save = save
        self.dtype = DTYPES[spec.dtype]

    def settled(self, sample_id: str) -> bool:
        return sample_id in self.done or self.failures.exhausted(sample_id)

    def run(self) -> RunOutcome:
        spec = self.spec
        pool = WriterPool(
            spec.output_dir,
            spec.writers,
            spec.batch_size,
            self.counters.written,
            fsync=spec.fsync,
            save=self.save,
        )
        try:
            reason = self._loop(pool)
        finally:
            pool.close()
        return self._outcome(reason, pool)

    def _loop(self, pool: WriterPool) -> str:
        plan = plan_batches(
            self.spec.dataset,
            self.extractor.tokenize,
            self.spec.batch_size,
            self.spec.group_window,
            self.settled,
        )
        for batch in plan:
            if (stop := self.hooks.stop_requested()) is not None:
                return stop
            if all(self.settled(item.id) for item in batch):
                continue
            for item, states in self._compute(batch).items():
                pool.submit(item.id, payload(item.id, item.tokens, states, self.extractor.layers))
            if pool.error is not None:
                return "disk_full"
        return "completed"

    def _outcome(self, reason: str, pool: WriterPool) -> RunOutcome:
        if pool.error is None:
            return RunOutcome(reason)
        if pool.error.errno in DISK_FULL_ERRNOS:
            return RunOutcome("disk_full", str(pool.error_path))
        raise pool.error

    def _compute(self, batch: list[Item]) -> dict[Item, torch.Tensor]:
        """States for the batch's unfinished samples (whole batch computed for determinism)."""
        try:
            with torch.inference_mode():
                states = self.extractor.forward([item.tokens for item in batch])
            self.hooks.on_computed(len(batch))
            self._count(len(batch))
            return {
                item: self._cpu(s)
                for item, s in zip(batch, states, strict=True)
                if not self.settled(item.id)
            }
        except Exception:
            return self._isolate(batch)

    def _isolate(self, batch: list[Item]) -> dict[Item, torch.Tensor]:
        out: dict[Item, torch.Tensor] = {}
        for item in batch:
            while not self.settled(item.id):
                try:
                    with torch.inference_mode():
                        (states,) = self.extractor.forward([item.tokens])
                    self.hooks.on_computed(1)
                    self._count(1)
                    out[item] = self._cpu(states)
                    break
                except Exception as exc:
                    error = f"{type(exc).__name__}: {exc}"
                    self.hooks.on_failure(item.id, self.failures.record(item.id, error), error)
        return out

    def _count(self, n: int) -> None:
        with self.counters.lock:
            self.counters.computed += n

    def _cpu(self, states: torch.Tensor) -> torch.Tensor:
        """A private CPU copy: saving a view would write the whole batch's storage."""
        return states.detach().to("cpu", self.dtype).clone()
