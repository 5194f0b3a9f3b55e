"""Serve an ASGI app with uvicorn in a background thread (the demo, tests, benchmarks).

``incident-bot serve`` runs uvicorn in the foreground instead; this is for a process that
also does other work while the app answers on a loopback port.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import uvicorn

from bot.core.procs import free_port


class ServedApp:
    def __init__(self, app: Any, host: str = "127.0.0.1", port: int | None = None) -> None:
        self.port = port or free_port()
        self.url = f"http://{host}:{self.port}"
        config = uvicorn.Config(app, host=host, port=self.port, log_level="warning",
                                access_log=False, lifespan="on")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, name="uvicorn", daemon=True)

    def start(self, timeout_s: float = 15.0) -> ServedApp:
        self.thread.start()
        deadline = time.monotonic() + timeout_s
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("uvicorn did not start")
            time.sleep(0.02)
        return self

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=15)
