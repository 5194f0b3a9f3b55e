"""A bounded pool of writer threads so disk writes overlap the next batch's compute.

The queue holds at most one batch: compute never runs more than a batch ahead of the
disk, which bounds both memory and the work a crash throws away. The first write error
stops the pool (later items are dropped, never half-written) and is handed back to the
job, which turns ENOSPC into a pause instead of a crash.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from pathlib import Path

from bot.core.durable import fsync_dir
from bot.extract.store import Payload, SaveFn, sample_path, save_atomic

OnWritten = Callable[[str, int], None]
_STOP = None


class WriterPool:
    def __init__(
        self,
        out: Path,
        threads: int,
        capacity: int,
        on_written: OnWritten,
        *,
        fsync: bool = True,
        save: SaveFn = save_atomic,
        dir_fsync_every: int = 64,
    ) -> None:
        self.out, self.fsync, self.save, self.on_written = out, fsync, save, on_written
        self.error: OSError | None = None
        self.error_path: Path | None = None
        self._lock = threading.Lock()
        self._since_dir_sync = 0
        self._dir_fsync_every = dir_fsync_every
        self._queue: queue.Queue[tuple[str, Payload] | None] = queue.Queue(maxsize=max(1, capacity))
        self._threads = [
            threading.Thread(target=self._run, name=f"writer-{i}", daemon=True)
            for i in range(threads)
        ]
        for thread in self._threads:
            thread.start()

    def submit(self, sample_id: str, obj: Payload) -> None:
        """Blocks while the queue is full; writes inline when the pool has no threads."""
        if not self._threads:
            self._write(sample_id, obj)
        elif self.error is None:
            self._queue.put((sample_id, obj))

    def _run(self) -> None:
        while (item := self._queue.get()) is not _STOP:
            if self.error is None:
                self._write(*item)

    def _write(self, sample_id: str, obj: Payload) -> None:
        path = sample_path(self.out, sample_id)
        try:
            size = self.save(obj, path, self.fsync)
        except OSError as exc:
            with self._lock:
                if self.error is None:
                    self.error, self.error_path = exc, path
            return
        self.on_written(sample_id, size)
        self._maybe_sync_dir()

    def _maybe_sync_dir(self) -> None:
        with self._lock:
            self._since_dir_sync += 1
            due = self.fsync and self._since_dir_sync >= self._dir_fsync_every
            if due:
                self._since_dir_sync = 0
        if due:
            fsync_dir(self.out)

    def close(self) -> None:
        """Drain the queue, stop the threads, make every rename durable."""
        for _ in self._threads:
            self._queue.put(_STOP)
        for thread in self._threads:
            thread.join()
        if self.fsync and self.error is None:
            fsync_dir(self.out)
