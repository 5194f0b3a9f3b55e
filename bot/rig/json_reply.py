"""One JSON answer from a stand-in's ``BaseHTTPRequestHandler`` (Slack's, PagerDuty's)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from http.server import BaseHTTPRequestHandler
from typing import Any


def send_json(handler: BaseHTTPRequestHandler, status: int, body: Any,
              headers: Mapping[str, str] | None = None,
              content_type: str = "application/json") -> None:
    """Status, the JSON body with its length, and any extra headers (Retry-After...)."""
    data = json.dumps(body).encode()
    handler.send_response(status)
    handler.send_header("Content-Type", content_type)
    handler.send_header("Content-Length", str(len(data)))
    for name, value in (headers or {}).items():
        handler.send_header(name, value)
    handler.end_headers()
    handler.wfile.write(data)
