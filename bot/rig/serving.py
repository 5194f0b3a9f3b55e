"""Serve an ASGI app with uvicorn in a background thread (the demo, tests, benchmarks).

``incident-bot serve`` runs uvicorn in the foreground instead; this is for a process that
also does other work while the app answers on a loopback port.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import uvicorn

from bot.config.settings import HttpSettings
from bot.core.procs import free_port
from bot.ingest.server import server_config


class ServedApp:
    def __init__(self, app: Any, host: str = "127.0.0.1", port: int | None = None,
                 http: HttpSettings | None = None) -> None:
        """``http``: the slow-client limits (defaults: the config file's defaults)."""
        self.port = port or free_port()
        self.url = f"http://{host}:{self.port}"
        config = server_config(app, http or HttpSettings(), host, self.port)
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
