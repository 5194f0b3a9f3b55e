"""Raw-socket requests a polite client library will not send: huge chunked bodies, trickled
headers. Shared by the edge tests and the hostile-corpus replay."""

from __future__ import annotations

import socket
import threading
import time
from urllib.parse import urlsplit


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
