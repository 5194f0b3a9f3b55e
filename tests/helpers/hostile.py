"""Raw-socket requests a polite client library will not send: huge chunked bodies, trickled
headers. Shared by the edge tests and the hostile-corpus replay."""

from __future__ import annotations

import hashlib
import hmac
import json
import socket
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlencode, urlsplit


def connect(url: str, timeout_s: float = 30.0) -> socket.socket:
    parts = urlsplit(url)
    return socket.create_connection((parts.hostname or "127.0.0.1", parts.port or 80),
                                    timeout=timeout_s)


def read_answer(sock: socket.socket) -> tuple[int, bytes]:
    """(status, whatever of the answer arrived until the server closed or went quiet)."""
    data = b""
    try:
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                break
            data += chunk
            if b"\r\n\r\n" in data and _complete(data):
                break
    except (ConnectionResetError, TimeoutError):
        pass
    if not data.startswith(b"HTTP/"):
        return 0, data
    return int(data.split(b" ", 2)[1]), data.split(b"\r\n\r\n", 1)[-1]


def _complete(data: bytes) -> bool:
    head, _, body = data.partition(b"\r\n\r\n")
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            return len(body) >= int(line.split(b":", 1)[1])
    return False


def chunked_post(url: str, path: str, total: int, headers: dict[str, str] | None = None,
                 chunk: int = 65536) -> tuple[int, bytes, int]:
    """POST ``total`` bytes chunked, sending until the server answers or hangs up:
    (status, answer body, bytes sent). A server that reads it all first shows up as
    ``sent == total``."""
    sock = connect(url)
    head = f"POST {path} HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n"
    head += "".join(f"{k}: {v}\r\n" for k, v in (headers or {}).items())
    sock.sendall(head.encode() + b"\r\n")
    frame = b"%x\r\n" % chunk + b"a" * chunk + b"\r\n"
    sent = [0]
    stop = threading.Event()

    def pump() -> None:
        try:
            while sent[0] < total and not stop.is_set():
                sock.sendall(frame)
                sent[0] += chunk
            sock.sendall(b"0\r\n\r\n")
        except OSError:  # the server answered and closed: what we wanted
            pass

    sender = threading.Thread(target=pump, daemon=True)
    sender.start()
    try:
        status, body = read_answer(sock)
    finally:
        stop.set()
        sender.join(timeout=30)
        sock.close()
    return status, body, sent[0]


def trickle_headers(url: str, limit_s: float, every_s: float = 0.2) -> float:
    """Send a request line, then one header byte at a time; the seconds until the server
    closed the connection (``limit_s`` + 1 if it never did)."""
    sock = connect(url)
    started = time.monotonic()
    sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: ")
    sock.settimeout(every_s)
    try:
        while time.monotonic() - started < limit_s:
            try:
                if sock.recv(1024) == b"":
                    return time.monotonic() - started
            except TimeoutError:
                sock.sendall(b"a")  # quiet for ``every_s``: one more byte
            except ConnectionResetError:
                return time.monotonic() - started
    except OSError:
        return time.monotonic() - started
    finally:
        sock.close()
    return limit_s + 1


# --- the hostile corpus (tests/fixtures/hostile/*.json): one request per file --------------

CORPUS = Path(__file__).resolve().parents[1] / "fixtures" / "hostile"


@dataclass(frozen=True)
class Answer:
    status: int  # 0: the server closed without answering
    body: bytes
    closed_after_s: float = 0.0


def load_case(name: str) -> dict[str, Any]:
    case: dict[str, Any] = json.loads((CORPUS / f"{name}.json").read_text())
    return case


def case_names() -> list[str]:
    return sorted(p.stem for p in CORPUS.glob("*.json"))


def _fill(text: str, respond: str) -> str:
    return text.replace("{respond}", respond).replace("{now}", str(int(time.time())))


def case_body(case: dict[str, Any], respond: str) -> bytes:
    """The request body the file describes (body, body_hex, body_json, form, payload or a
    ``repeat`` generator); the placeholders ``{respond}`` and ``{now}`` filled in."""
    gen = case.get("generator") or {}
    if gen.get("kind") == "repeat":
        return b"".join(part.encode() * count for part, count in gen["parts"])
    if "body_hex" in case:
        return bytes.fromhex(case["body_hex"])
    if "body_json" in case:
        return _fill(json.dumps(case["body_json"]), respond).encode()
    if "form" in case:
        return urlencode({k: _fill(v, respond) for k, v in case["form"].items()}).encode()
    if "payload" in case:
        return urlencode({"payload": _fill(json.dumps(case["payload"]), respond)}).encode()
    return _fill(case.get("body", ""), respond).encode()


def case_headers(case: dict[str, Any], body: bytes, secret: str, respond: str) -> dict[str, str]:
    headers = {k: _fill(v, respond) for k, v in (case.get("headers") or {}).items()}
    if "sign" in case:
        ts = int(time.time()) - int(case["sign"].get("age_s", 0))
        mac = hmac.new(secret.encode(), b"v0:%d:" % ts + body, hashlib.sha256).hexdigest()
        headers.update({"X-Slack-Request-Timestamp": str(ts), "X-Slack-Signature": "v0=" + mac})
    return headers


def replay(case: dict[str, Any], url: str, secret: str, respond: str) -> Answer:
    """Send one corpus request the way the file says, over a raw socket where a polite
    client could not (chunked floods, trickles, declared-only lengths)."""
    kind = (case.get("generator") or {}).get("kind")
    body = case_body(case, respond)
    headers = case_headers(case, body, secret, respond)
    if kind == "chunked":
        status, answer, _ = chunked_post(url, case["path"], case["generator"]["bytes"], headers)
        return Answer(status, answer)
    if kind == "trickle_headers":
        return Answer(0, b"", trickle_headers(url, limit_s=30))
    with connect(url) as sock:
        head = f"{case['method']} {case['path']} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
        if kind == "partial_body":
            body = case["generator"]["body"].encode()
        elif "content-length" not in {k.lower() for k in headers}:
            headers["Content-Length"] = str(len(body))
        if kind == "declared_only":
            body = b""
        head += "".join(f"{k}: {v}\r\n" for k, v in headers.items())
        sock.sendall(head.encode() + b"\r\n" + body)
        status, answer = read_answer(sock)
    return Answer(status, answer)
