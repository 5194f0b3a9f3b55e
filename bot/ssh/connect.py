"""Open one authenticated paramiko transport within a single deadline.

Host keys are checked against the target's known_hosts with nothing ever added
(RejectPolicy semantics); no agent and no key search, only the configured key.
Every failure maps to one of base.py's ``SSHError`` kinds with a reason a person can act on.
"""

from __future__ import annotations

import os
import socket
import time

from bot.ssh.base import AuthFailed, HostKeyMismatch, HostUnreachable, SSHTarget
from bot.ssh.lib import paramiko

DEFAULT_KNOWN_HOSTS = "~/.ssh/known_hosts"
# known_hosts key type -> host key algorithms that prove it (RSA keys sign with SHA-2 too).
_ALGOS = {"ssh-rsa": ("rsa-sha2-512", "rsa-sha2-256", "ssh-rsa")}


def host_key_name(target: SSHTarget) -> str:
    """The name known_hosts uses: ``host`` on port 22, ``[host]:port`` otherwise."""
    return target.host if target.port == 22 else f"[{target.host}]:{target.port}"


def load_known(target: SSHTarget) -> dict[str, paramiko.PKey]:
    """Known keys for this target by type; an unreadable file means none are known."""
    path = os.path.expanduser(target.known_hosts or DEFAULT_KNOWN_HOSTS)
    keys = paramiko.HostKeys()
    try:
        keys.load(path)
    except (OSError, paramiko.SSHException):
        return {}
    entry = keys.lookup(host_key_name(target))
    return dict(entry) if entry is not None else {}


def load_key(target: SSHTarget) -> paramiko.PKey:
    if not target.key_path:
        raise AuthFailed(f"no SSH key configured for {target.name}")
    path = os.path.expanduser(target.key_path)
    try:
        return paramiko.PKey.from_path(path)
    except FileNotFoundError:
        raise AuthFailed(f"SSH key {path} not found") from None
    except paramiko.PasswordRequiredException:
        raise AuthFailed(f"SSH key {path} needs a passphrase (agents are not used)") from None
    except (OSError, paramiko.SSHException, ValueError) as exc:
        raise AuthFailed(f"cannot load SSH key {path}: {exc}") from None


# AEAD first: with AES-GCM the cipher's own tag (checked in C by ``cryptography``) is the
# integrity check. With paramiko's default aes-ctr + hmac-sha2-256, every packet's MAC is
# compared byte by byte in Python (``util.constant_time_bytes_eq``): the bot spent 13-25%
# more CPU per diagnosis with it, measured side by side (bench/cipher_ab.py).
AEAD_FIRST: tuple[str, ...] = ("aes256-gcm@openssh.com", "aes128-gcm@openssh.com")


def _prefer_known_types(transport: paramiko.Transport, known: dict[str, paramiko.PKey]) -> None:
    """Ask for the host key types we can check first, as OpenSSH does, and AEAD ciphers."""
    opts = transport.get_security_options()
    wanted = [a for t in known for a in _ALGOS.get(t, (t,)) if a in opts.key_types]
    if wanted:
        opts.key_types = tuple(wanted) + tuple(a for a in opts.key_types if a not in wanted)
    aead = tuple(c for c in AEAD_FIRST if c in opts.ciphers)
    opts.ciphers = aead + tuple(c for c in opts.ciphers if c not in aead)


def check_host_key(target: SSHTarget, offered: paramiko.PKey,
                   known: dict[str, paramiko.PKey]) -> None:
    """Raise ``HostKeyMismatch`` unless ``offered`` is the known key of its type."""
    fingerprint = offered.fingerprint
    expected = known.get(offered.get_name())
    if expected is None:
        raise HostKeyMismatch(
            f"host key mismatch for {target.name}: {fingerprint} is not in known_hosts"
            f" ({target.known_hosts or DEFAULT_KNOWN_HOSTS})")
    if expected != offered:
        raise HostKeyMismatch(
            f"host key mismatch for {target.name}: offered {fingerprint},"
            f" known_hosts has {expected.fingerprint}")


def _remaining(deadline: float, target: SSHTarget, stage: str) -> float:
    left = deadline - time.monotonic()
    if left <= 0:
        raise HostUnreachable(f"{target.address}: connect deadline passed during {stage}")
    return left


def _tcp(target: SSHTarget, deadline: float) -> socket.socket:
    try:
        return socket.create_connection((target.host, target.port),
                                        timeout=_remaining(deadline, target, "TCP connect"))
    except TimeoutError:
        raise HostUnreachable(f"{target.address}: TCP connect timed out") from None
    except OSError as exc:
        raise HostUnreachable(f"{target.address}: {exc.strerror or exc}") from None


class PooledTransport(paramiko.Transport):
    """paramiko's transport thread wakes every 0.1 s only to see whether it was closed:
    ~0.6 ms of CPU a second per idle connection, 73 ms/s for a pool of 128 (bench/fleet.py
    measures the idle pool). Data still wakes it at once, ``close()`` closes the socket
    itself and keepalives are checked on each wake, so once a second is enough; the
    thread lingers up to 1 s after a close."""

    _active_check_timeout = 1.0


def _handshake(target: SSHTarget, sock: socket.socket, deadline: float,
               known: dict[str, paramiko.PKey]) -> paramiko.Transport:
    transport = PooledTransport(sock)
    left = _remaining(deadline, target, "banner")
    transport.banner_timeout = left
    transport.handshake_timeout = left
    _prefer_known_types(transport, known)
    try:
        transport.start_client(timeout=left)
    except (paramiko.SSHException, EOFError, OSError) as exc:
        transport.close()
        reason = str(exc) or type(exc).__name__
        raise HostUnreachable(f"{target.address}: SSH handshake failed: {reason}") from None
    if not (transport.is_active() and transport.initial_kex_done):
        transport.close()  # start_client returns quietly when its timeout passes
        raise HostUnreachable(f"{target.address}: no SSH banner/key exchange within the deadline")
    return transport


def _auth(target: SSHTarget, transport: paramiko.Transport, key: paramiko.PKey,
          deadline: float) -> None:
    transport.auth_timeout = _remaining(deadline, target, "auth")
    try:
        transport.auth_publickey(target.user, key)
    except paramiko.AuthenticationException as exc:
        if time.monotonic() >= deadline:  # paramiko reports its auth timeout this way
            raise HostUnreachable(f"{target.address}: no auth answer within the deadline") from None
        raise AuthFailed(f"{target.address}: authentication failed: {exc}") from None
    except (paramiko.SSHException, EOFError, OSError) as exc:
        raise HostUnreachable(f"{target.address}: lost during auth: {exc}") from None
    if not transport.is_authenticated():
        raise AuthFailed(f"{target.address}: authentication failed")


def open_transport(target: SSHTarget, timeout_s: float,
                   keepalive_s: int = 15) -> paramiko.Transport:
    """TCP connect, banner, key exchange, host key check and auth, all within ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    key = load_key(target)
    known = load_known(target)
    sock = _tcp(target, deadline)
    try:
        transport = _handshake(target, sock, deadline, known)
    except BaseException:
        sock.close()
        raise
    try:
        check_host_key(target, transport.get_remote_server_key(), known)
        _auth(target, transport, key, deadline)
    except BaseException:
        transport.close()
        raise
    transport.set_keepalive(keepalive_s)
    return transport
