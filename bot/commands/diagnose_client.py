"""``incident-bot diagnose`` asking a running ``serve`` first (issue 37). Standard library
only: this is the path that must not pay for paramiko, pydantic or the settings.

Configured by the environment, as a person's shell would hold it: ``INCIDENT_BOT_URL``
(serve's base URL, e.g. ``https://incident-bot.example.com``) and
``INCIDENT_BOT_DIAGNOSE_TOKEN``. Only an inventory name is sent (serve refuses addresses).

``ask`` returns the diagnosis as ``diagnose --json`` prints it, or None when this machine
should diagnose on its own connection: serve not configured, not reachable, busy, or not
knowing the host. A refusal that another try cannot fix (a wrong token, a bad request) is
a ``UserError``: silently going around a misconfigured token would hide it.
"""

from __future__ import annotations

import http.client
import json
import os
import sys
from typing import Any
from urllib.parse import urlsplit

from bot.core import strings as S
from bot.core.errors import UserError

URL_ENV, TOKEN_ENV = "INCIDENT_BOT_URL", "INCIDENT_BOT_DIAGNOSE_TOKEN"
CONNECT_TIMEOUT_S = 2.0
ANSWER_TIMEOUT_S = 60.0  # a diagnosis waits for its slowest probe (10 s by default)
MAX_ANSWER = 16 << 20
FALL_BACK = (404, 429, 500, 502, 503, 504)  # not known there, busy, or serve in trouble


_tried: list[bool] = []  # serve was asked in this process already (the fast path's miss)


def fast_main(args: list[str]) -> int | None:
    """``diagnose TARGET [--playbook NAME] [--json]`` answered by serve before the CLI
    framework loads (typer builds its parameters with pydantic: most of the start-up);
    None when this is not that case (any other option, an address, no serve configured,
    or serve did not answer): ``bot.cli`` then runs the command as usual."""
    asked = _parse(args)
    if asked is None or configured() is None:
        return None
    target, playbook, as_json = asked
    answer = ask(target, playbook)
    if answer is None:
        return None
    if as_json:
        print(json.dumps(answer), flush=True)
    if answer.get("status") == "unreachable":  # serve has the key: no hint about one
        raise UserError(unreachable_line(answer, has_key=True), 1)
    if not as_json:
        from bot.commands.common import console
        from bot.commands.diagnose_view import render
        from bot.domain.findings import Diagnosis

        render(Diagnosis.from_dict(answer), console())
    return 0


def unreachable_line(answer: dict[str, Any], *, has_key: bool) -> str:
    """Why the host could not be read (a diagnosis as ``--json`` prints it), and what to
    pass when no key was given."""
    finding = (answer.get("findings") or [{}])[0]
    evidence = finding.get("evidence") or {}
    line = (f"{finding.get('title', 'unreachable')} "
            f"({evidence.get('address', answer.get('host', ''))}): {finding.get('detail', '')}")
    if finding.get("code") == "ssh.auth_failed" and not has_key:
        line += S.DIAG_NO_KEY_HINT
    return line


def _parse(args: list[str]) -> tuple[str, str, bool] | None:
    """TARGET, the playbook and ``--json`` from exactly the options this path takes."""
    target, playbook, as_json = None, "auto", False
    rest = list(args)
    while rest:
        arg = rest.pop(0)
        if arg == "--json":
            as_json = True
        elif arg in ("--playbook", "-p") and rest:
            playbook = rest.pop(0)
        elif arg.startswith("--playbook="):
            playbook = arg.split("=", 1)[1]
        elif arg.startswith("-") or target is not None:
            return None  # --config, --ssh-key, --help, …: the full command decides
        else:
            target = arg
    return (target, playbook, as_json) if target else None


def configured() -> tuple[str, str] | None:
    url, token = os.environ.get(URL_ENV, "").strip(), os.environ.get(TOKEN_ENV, "").strip()
    return (url.rstrip("/"), token) if url and token else None


def ask(host: str, playbook: str) -> dict[str, Any] | None:
    """The diagnosis from serve, or None: diagnose here instead (said on stderr)."""
    where = configured()
    if where is None or "@" in host or ":" in host or _tried:
        return None
    _tried.append(True)
    url, token = where
    try:
        status, body = _post(url, token, {"host": host, "playbook": playbook})
    except (OSError, http.client.HTTPException) as exc:
        _note(url, f"{type(exc).__name__}: {exc}")
        return None
    if status == 200:
        data = json.loads(body)
        if isinstance(data, dict):
            return data
        _note(url, "an answer that is not a diagnosis")
        return None
    reason = _reason(body)
    if status in FALL_BACK:
        _note(url, f"{status}: {reason}")
        return None
    raise UserError(S.DIAG_SERVE_REFUSED.format(url=url, status=status, reason=reason), 2)


def _post(url: str, token: str, payload: dict[str, str]) -> tuple[int, bytes]:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise UserError(f"{URL_ENV}: not an http(s) URL: {url}", 2)
    conn_type = (http.client.HTTPSConnection if parts.scheme == "https"
                 else http.client.HTTPConnection)
    conn = conn_type(parts.hostname, parts.port, timeout=CONNECT_TIMEOUT_S)
    try:
        conn.connect()
        if conn.sock is not None:
            conn.sock.settimeout(ANSWER_TIMEOUT_S)  # connected: now wait for the probes
        conn.request("POST", f"{parts.path.rstrip('/')}/diagnose", body=json.dumps(payload),
                     headers={"Authorization": f"Bearer {token}",
                              "Content-Type": "application/json"})
        response = conn.getresponse()
        return response.status, response.read(MAX_ANSWER)
    finally:
        conn.close()


def _reason(body: bytes) -> str:
    try:
        data = json.loads(body)
    except ValueError:
        return body[:200].decode(errors="replace")
    return str(data.get("error", "")) if isinstance(data, dict) else ""


def _note(url: str, reason: str) -> None:
    print(S.DIAG_SERVE_FALLBACK.format(url=url, reason=reason[:200]), file=sys.stderr)
