"""Key material for a sim host: an ed25519 host key and an authorized client key.

Generated in-process with ``cryptography`` (already a paramiko dependency) in OpenSSH
format, byte-compatible with ``ssh-keygen -t ed25519 -N ''`` output and two subprocesses
cheaper per host.
"""

from __future__ import annotations

import os
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey


def _write_private(path: Path, comment: str) -> str:
    key = Ed25519PrivateKey.generate()
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH,
                            serialization.NoEncryption())
    path.unlink(missing_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(pem)
    pub = key.public_key().public_bytes(serialization.Encoding.OpenSSH,
                                        serialization.PublicFormat.OpenSSH).decode()
    line = f"{pub} {comment}"
    path.with_name(path.name + ".pub").write_text(line + "\n")
    return pub


def write_keypair(workdir: Path) -> tuple[Path, str]:
    """Write host and client keys plus ``authorized_keys``; return (client key, host pub)."""
    host_pub = _write_private(workdir / "host_ed25519", "sim-host")
    client_pub = _write_private(workdir / "id_ed25519", "incident-bot-sim-client")
    (workdir / "authorized_keys").write_text(f"{client_pub} incident-bot-sim-client\n")
    return workdir / "id_ed25519", host_pub


def write_host_key(workdir: Path) -> str:
    """A new host key in place of the old one (another machine answering at this address:
    the bot's known_hosts no longer matches); returns its public line."""
    return _write_private(workdir / "host_ed25519", "sim-host")
