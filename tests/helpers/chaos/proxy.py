"""A TCP proxy that can add latency: the bot reaches a host through it, and the chaos run
turns a delay on and off (``tc netem`` in a network namespace would be the kernel's way;
this kernel has no ``sch_netem``, so the delay is added in user space, per chunk and in
order, each direction on its own)."""

from __future__ import annotations

import asyncio
import contextlib
import threading

from bot.core.procs import free_port


class DelayProxy:
    """127.0.0.1:``port`` → 127.0.0.1:``upstream``, with ``delay_s`` added to every chunk."""

    def __init__(self, upstream: int) -> None:
        self.upstream = upstream
        self.port = free_port()
        self.delay_s = 0.0
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._serve, name=f"proxy-{upstream}",
                                        daemon=True)

    def start(self) -> DelayProxy:
        self._thread.start()
        assert self._ready.wait(10), "the delay proxy did not start"
        return self

    def stop(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=5)

    def _serve(self) -> None:
        asyncio.set_event_loop(self._loop)
        server = self._loop.run_until_complete(
            asyncio.start_server(self._connection, "127.0.0.1", self.port))
        self._ready.set()
        try:
            self._loop.run_forever()
        finally:
            server.close()
            pending = asyncio.all_tasks(self._loop)  # open connections: ended, not leaked
            for task in pending:
                task.cancel()
            self._loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
            self._loop.close()

    async def _connection(self, reader: asyncio.StreamReader,
                          writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.upstream)
        except OSError:
            writer.close()
            return
        await asyncio.gather(self._pump(reader, up_writer), self._pump(up_reader, writer),
                             return_exceptions=True)

    async def _pump(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while chunk := await reader.read(65536):
                if self.delay_s > 0:
                    await asyncio.sleep(self.delay_s)
                writer.write(chunk)
                await writer.drain()
        except (OSError, asyncio.IncompleteReadError):
            pass
        finally:
            with contextlib.suppress(OSError, RuntimeError):
                writer.close()
