"""Reading a request body under a byte cap and a deadline, whatever the client claims.

Every HTTP edge reads through here before it authenticates or parses anything: the
declared ``Content-Length`` is checked first, then the bytes actually streamed (chunked
bodies declare nothing), and reading stops at the first byte past the cap, so a 100 MB
upload costs one chunk of memory, not 100 MB. A client that trickles its body is cut
off at the deadline instead of holding a worker forever.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator


class BodyTooLarge(Exception):
    """More bytes than the cap, declared or streamed (HTTP 413)."""


class BodyTooSlow(Exception):
    """The body did not arrive within the read deadline (HTTP 408)."""


class BadLength(ValueError):
    """A Content-Length that is not a plain decimal number (HTTP 400)."""


def check_declared(declared: str | None, limit: int) -> None:
    """Refuse on the header alone, before a single body byte is read."""
    if declared is None:
        return
    if not declared.isascii() or not declared.isdigit():
        raise BadLength("Content-Length is not a number")
    if int(declared) > limit:
        raise BodyTooLarge


async def read_capped(declared: str | None, stream: AsyncIterator[bytes], limit: int,
                      deadline_s: float | None = None) -> bytes:
    """The whole body, at most ``limit`` bytes, within ``deadline_s`` seconds."""
    check_declared(declared, limit)
    try:
        async with asyncio.timeout(deadline_s):
            return await _collect(stream, limit)
    except TimeoutError:
        raise BodyTooSlow from None


async def _collect(stream: AsyncIterator[bytes], limit: int) -> bytes:
    chunks: list[bytes] = []
    size = 0
    async for chunk in stream:
        size += len(chunk)
        if size > limit:
            raise BodyTooLarge
        chunks.append(chunk)
    return b"".join(chunks)
