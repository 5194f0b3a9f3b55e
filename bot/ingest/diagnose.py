"""``POST /diagnose``: a person's ``incident-bot diagnose`` answered by a running ``serve``
on its warm SSH pool (issue 37): no interpreter start-up of paramiko and the settings,
no SSH handshake, the connection to the host already open.

Who may call it: holders of ``INCIDENT_BOT_DIAGNOSE_TOKEN``, a token of its own. Not the
alert token: every agent on every GPU host holds that one, and a diagnosis reads other
hosts' process lists, units and command lines with the bot's SSH identity. A host must be
able to report its own trouble, never to read its neighbours. Without the token set the
endpoint answers 401 to everyone (as the alert endpoints do without theirs).

Checked in order, each refusal with ``{"error": reason}``: 401 (constant-time compare,
before the body is read), 413 over ``MAX_BODY`` bytes, 408 when the body is slow, 400 for
anything but ``{"host": NAME, "playbook": NAME}`` (the playbook one of ``playbooks.names``),
404 for a host not in the inventory (an address is never accepted: the bot's key is used
only on the hosts its config lists), 429 when ``max_running`` diagnoses already run here,
then 200 with the diagnosis as ``diagnose --json`` prints it (an unreachable host too:
its ``status`` says so).
"""

from __future__ import annotations

import hmac
import json
import logging
import threading
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from bot.config.inventory import NotInInventory, known, options_for
from bot.config.settings import Settings, secret
from bot.core import metrics
from bot.core import strings as S
from bot.core.bodies import BodyTooLarge, BodyTooSlow
from bot.core.errors import log_internal
from bot.ingest.http import read_limited
from bot.ingest.schema import PayloadError
from bot.ssh.base import SSHRunner
from playbooks import names, run_playbook

log = logging.getLogger(__name__)
ROUTE = "/diagnose"
MAX_BODY = 4096
TOKEN_ENV = "INCIDENT_BOT_DIAGNOSE_TOKEN"


def _answer(status: int, body: dict[str, Any], **headers: str) -> JSONResponse:
    metrics.HTTP_REQUESTS.labels(route=ROUTE, status=str(status)).inc()
    return JSONResponse(body, status_code=status, headers=headers or None)


class DiagnoseEndpoint:
    def __init__(self, settings: Settings, runner: SSHRunner, *, max_running: int = 4,
                 body_timeout_s: float = 10.0) -> None:
        token = secret(settings.incident_bot_diagnose_token)
        self.token = f"Bearer {token}".encode() if token else None
        self.settings, self.runner = settings, runner
        self.body_timeout_s = body_timeout_s
        self.slots = threading.BoundedSemaphore(max_running)

    def authorized(self, request: Request) -> bool:
        given = request.headers.get("authorization", "").encode()
        return self.token is not None and hmac.compare_digest(given, self.token)

    async def handle(self, request: Request) -> Response:
        if not self.authorized(request):
            reason = S.DIAG_SERVE_NO_TOKEN if self.token is None else S.DIAG_SERVE_UNAUTHORIZED
            return _answer(401, {"error": reason}, **{"WWW-Authenticate": "Bearer"})
        try:
            host, playbook = self._asked(await read_limited(request, MAX_BODY,
                                                            self.body_timeout_s))
        except BodyTooLarge:
            return _answer(413, {"error": S.ALERT_TOO_LARGE.format(limit=MAX_BODY)})
        except BodyTooSlow:
            return _answer(408, {"error": S.BODY_TOO_SLOW.format(seconds=self.body_timeout_s)})
        except PayloadError as exc:
            return _answer(400, {"error": str(exc)})
        try:
            target = known(self.settings, host)
        except NotInInventory:
            return _answer(404, {"error": S.HOST_NOT_IN_INVENTORY.format(host=host)})
        if not self.slots.acquire(blocking=False):
            return _answer(429, {"error": S.DIAG_SERVE_BUSY}, **{"Retry-After": "1"})
        try:
            options = options_for(self.settings, target)
            diagnosis = await run_in_threadpool(run_playbook, self.runner, target, playbook,
                                                options=options)
        except Exception as exc:  # a bug of ours: said with an id, never a traceback
            return _answer(500, {"error": S.INTERNAL_ERROR.format(
                error_id=log_internal(exc, ROUTE))})
        finally:
            self.slots.release()
        log.info("diagnose %s (%s) for a terminal: %s in %.2f s", host, playbook,
                 diagnosis.status.value, diagnosis.duration_s)
        return _answer(200, diagnosis.to_dict())

    @staticmethod
    def _asked(body: bytes) -> tuple[str, str]:
        """``{"host": NAME, "playbook": NAME}`` or PayloadError with the reason."""
        try:
            data = json.loads(body)
        except (ValueError, RecursionError):
            raise PayloadError(S.DIAG_SERVE_BAD_BODY) from None
        if not isinstance(data, dict) or set(data) - {"host", "playbook"}:
            raise PayloadError(S.DIAG_SERVE_BAD_BODY)
        host, playbook = data.get("host"), data.get("playbook", "auto")
        if not isinstance(host, str) or not host or len(host) > 253:
            raise PayloadError(S.DIAG_SERVE_BAD_BODY)
        if not isinstance(playbook, str) or playbook not in names():
            raise PayloadError(S.DIAG_UNKNOWN_PLAYBOOK.format(
                name=str(playbook)[:40], names=", ".join(names())))
        return host, playbook
