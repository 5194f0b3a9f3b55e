"""A local stand-in for Slack's Socket Mode endpoint: a WebSocket server on a free port.

It speaks the protocol a Socket Mode client expects (RFC 6455 over plain TCP on
127.0.0.1): the upgrade handshake, a ``hello`` frame, then envelopes
(``events_api``, ``interactive``, ``slash_commands``) that the app must acknowledge by
``envelope_id``. ``SlackStandIn.socket_url`` points ``apps.connections.open`` here.
"""

from __future__ import annotations

import base64
import hashlib
import json
import socket
import socketserver
import struct
import threading
import time
import uuid
from typing import Any

GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
TEXT, CLOSE, PING, PONG = 0x1, 0x8, 0x9, 0xA


def read_frame(sock: socket.socket) -> tuple[int, bytes]:
    """One (client, so masked) frame: (opcode, payload)."""
    head = _exact(sock, 2)
    opcode, length = head[0] & 0x0F, head[1] & 0x7F
    if length == 126:
        length = struct.unpack("!H", _exact(sock, 2))[0]
    elif length == 127:
        length = struct.unpack("!Q", _exact(sock, 8))[0]
    mask = _exact(sock, 4) if head[1] & 0x80 else b"\0\0\0\0"
    data = _exact(sock, length)
    return opcode, bytes(b ^ mask[i % 4] for i, b in enumerate(data))


def frame(opcode: int, data: bytes) -> bytes:
    """One server frame (unmasked, final)."""
    n = len(data)
    if n < 126:
        head = struct.pack("!BB", 0x80 | opcode, n)
    elif n < 65536:
        head = struct.pack("!BBH", 0x80 | opcode, 126, n)
    else:
        head = struct.pack("!BBQ", 0x80 | opcode, 127, n)
    return head + data


def _exact(sock: socket.socket, n: int) -> bytes:
    out = b""
    while len(out) < n:
        chunk = sock.recv(n - len(out))
        if not chunk:
            raise ConnectionError("socket closed")
        out += chunk
    return out


class SocketModeStandIn:
    def __init__(self) -> None:
        self.acks: dict[str, dict[str, Any]] = {}
        self.connections: list[socket.socket] = []
        self._cv = threading.Condition()
        self._server: socketserver.ThreadingTCPServer | None = None

    def start(self) -> SocketModeStandIn:
        standin = self

        class Handler(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                standin._serve(self.request)

        socketserver.ThreadingTCPServer.allow_reuse_address = True
        self._server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, args=(0.05,), daemon=True,
                         name="socket-mode-standin").start()
        return self

    def stop(self) -> None:
        with self._cv:
            for conn in self.connections:
                try:
                    conn.sendall(frame(CLOSE, b""))
                    conn.close()
                except OSError:
                    pass
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    @property
    def url(self) -> str:
        assert self._server is not None, "stand-in not started"
        return f"ws://127.0.0.1:{self._server.server_address[1]}/link/?ticket=stand-in"

    def wait_connected(self, timeout_s: float = 15.0) -> None:
        self._wait(lambda: bool(self.connections), timeout_s, "a Socket Mode connection")

    def send(self, kind: str, payload: dict[str, Any]) -> str:
        """Deliver one envelope (``events_api``, ``interactive``, ``slash_commands``)."""
        envelope_id = str(uuid.uuid4())
        envelope = {"envelope_id": envelope_id, "type": kind, "payload": payload,
                    "accepts_response_payload": kind != "events_api",
                    "retry_attempt": 0, "retry_reason": ""}
        with self._cv:
            conn = self.connections[-1]
            conn.sendall(frame(TEXT, json.dumps(envelope).encode()))
        return envelope_id

    def wait_ack(self, envelope_id: str, timeout_s: float = 10.0) -> dict[str, Any]:
        self._wait(lambda: envelope_id in self.acks, timeout_s, f"the ack of {envelope_id}")
        return self.acks[envelope_id]

    def _wait(self, check: Any, timeout_s: float, what: str) -> None:
        deadline = time.monotonic() + timeout_s
        with self._cv:
            while not check():
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"socket stand-in: no {what}")
                self._cv.wait(left)

    def _serve(self, conn: socket.socket) -> None:
        request = b""
        while b"\r\n\r\n" not in request:
            request += conn.recv(4096)
        headers = dict(line.split(": ", 1) for line in
                       request.decode("latin-1").split("\r\n")[1:] if ": " in line)
        key = {k.lower(): v for k, v in headers.items()}["sec-websocket-key"].strip()
        accept = base64.b64encode(hashlib.sha1((key + GUID).encode()).digest()).decode()
        conn.sendall(("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
                      f"Connection: Upgrade\r\nSec-WebSocket-Accept: {accept}\r\n\r\n").encode())
        hello = {"type": "hello", "num_connections": 1, "connection_info": {"app_id": "A0001"},
                 "debug_info": {"host": "stand-in", "approximate_connection_time": 3600}}
        with self._cv:
            conn.sendall(frame(TEXT, json.dumps(hello).encode()))
            self.connections.append(conn)
            self._cv.notify_all()
        self._read_loop(conn)

    def _read_loop(self, conn: socket.socket) -> None:
        while True:
            try:
                opcode, data = read_frame(conn)
            except (ConnectionError, OSError):
                return
            if opcode == PING:
                with self._cv:
                    conn.sendall(frame(PONG, data))
            elif opcode == CLOSE:
                return
            elif opcode == TEXT:
                message = json.loads(data)
                with self._cv:
                    self.acks[str(message.get("envelope_id", ""))] = message
                    self._cv.notify_all()
