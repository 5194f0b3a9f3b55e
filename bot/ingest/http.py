"""The HTTP service: alert webhooks, health, metrics, and whatever the chat side mounts.

``create_app`` builds one Starlette app around an ``IncidentStore``. Nothing that
matters lives in the process: every replica on the same Redis answers the same way.

Answers, in the order they are checked (each with ``{"error": reason}``):
401 without the bearer token (constant-time compare), 413 over ``http.max_body_bytes``
(the declared Content-Length and the bytes actually streamed), 408 when the body does not
arrive within ``http.body_timeout_s``, 400 when the body cannot be used (bad JSON, too
deep, a lone surrogate, a 5000-digit number, a wrong shape), 503 with ``Retry-After``
when Redis cannot take the write (out of memory, read-only, loading, MISCONF, too many
clients, a timeout, contention: ``storage.connection.refusal``; Alertmanager and the agent
retry, so nothing is lost, and nothing was half-written: the write is one MULTI),
otherwise 200 with what happened to each alert. Each refusal is counted on ``/metrics``
(``incident_bot_redis_refusals_total{reason,where}``).
"""

from __future__ import annotations

import contextlib
import hmac
import inspect
import logging
import os
import socket
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from bot.config.settings import Settings, secret
from bot.core import metrics
from bot.core import strings as S
from bot.core.bodies import BadLength, BodyTooLarge, BodyTooSlow, read_capped
from bot.core.errors import ConfigError, log_internal
from bot.core.heartbeat import Heartbeats
from bot.domain.incident import Alert
from bot.domain.planner import PlanOutcome
from bot.domain.xid import xid_policy_from_extra
from bot.ingest import alertmanager, openapi, webhook
from bot.ingest.group_commit import GroupCommit, observed
from bot.ingest.mapping import Mapper
from bot.ingest.schema import PayloadError
from bot.jobs.status import refresh_job_metrics
from storage.connection import StorageError as RedisError
from storage.connection import refusal
from storage.incidents import Contention, IncidentStore
from storage.stores import Stores

log = logging.getLogger(__name__)

Hook = Callable[[], Any]
Parser = Callable[[bytes, Mapper], list[Alert]]
RETRY_AFTER_S = 5  # what a 503 asks Alertmanager, the agent and Slack to wait


def _error(status: int, reason: str, route: str, **headers: str) -> JSONResponse:
    metrics.ALERTS_REJECTED.labels(reason=str(status)).inc()
    metrics.HTTP_REQUESTS.labels(route=route, status=str(status)).inc()
    return JSONResponse({"error": reason}, status_code=status, headers=headers or None)


def redis_unavailable(exc: BaseException) -> bool:
    """Errors that mean "Redis cannot take writes right now" (retry), not a bug of ours:
    out of memory, read-only, loading, MISCONF, too many clients, timeouts, contention."""
    return refusal(exc) is not None


def unavailable(exc: BaseException, where: str, route: str, reason: str) -> JSONResponse | None:
    """The 503 with ``Retry-After`` for a Redis refusal (counted by its reason), else None:
    the caller's error is a bug of ours."""
    why = refusal(exc)
    if why is None:
        return None
    metrics.refused(why, where)
    log.warning("%s refused, Redis unavailable (%s): %s", route, why, exc)
    return _error(503, reason, route, **{"Retry-After": str(RETRY_AFTER_S)})


async def read_limited(request: Request, limit: int, deadline_s: float | None = None) -> bytes:
    """The body, refusing more than ``limit`` bytes whatever Content-Length claimed, and a
    body that has not arrived within ``deadline_s``."""
    try:
        return await read_capped(request.headers.get("content-length"), request.stream(),
                                 limit, deadline_s)
    except BadLength:
        raise PayloadError(S.BAD_CONTENT_LENGTH) from None


class AlertEndpoints:
    """The two webhooks; one instance per app."""

    def __init__(self, settings: Settings, store: IncidentStore, mapper: Mapper) -> None:
        self.ingest = observed(store.ingest)
        self.writer = GroupCommit(self.ingest) if settings.http.group_commit else None
        self.mapper = mapper
        self.limit = settings.http.max_body_bytes
        self.body_timeout_s = settings.http.body_timeout_s
        token = secret(settings.incident_bot_alert_token)
        self.token = f"Bearer {token}".encode() if token else None

    def authorized(self, request: Request) -> bool:
        given = request.headers.get("authorization", "").encode()
        return self.token is not None and hmac.compare_digest(given, self.token)

    async def alertmanager(self, request: Request) -> Response:
        return await self._ingest(request, alertmanager.parse, "/alerts/alertmanager")

    async def generic(self, request: Request) -> Response:
        return await self._ingest(request, webhook.parse, "/alerts")

    async def _ingest(self, request: Request, parse: Parser, route: str) -> Response:
        if not self.authorized(request):
            reason = S.ALERT_NO_TOKEN_CONFIGURED if self.token is None else S.ALERT_UNAUTHORIZED
            return _error(401, reason, route, **{"WWW-Authenticate": "Bearer"})
        try:
            body = await read_limited(request, self.limit, self.body_timeout_s)
            alerts = parse(body, self.mapper)
        except BodyTooLarge:
            return _error(413, S.ALERT_TOO_LARGE.format(limit=self.limit), route)
        except BodyTooSlow:
            return _error(408, S.BODY_TOO_SLOW.format(seconds=self.body_timeout_s), route)
        except PayloadError as exc:
            return _error(400, str(exc), route)
        try:
            result = await (self.writer.submit(alerts) if self.writer is not None
                            else run_in_threadpool(self.ingest, alerts))
        except (RedisError, Contention) as exc:
            refused = unavailable(exc, "ingest", route, S.ALERT_STORE_UNAVAILABLE)
            if refused is not None:
                return refused
            return _error(500, S.INTERNAL_ERROR.format(error_id=log_internal(exc, route)), route)
        self._count(alerts, [o for o, _ in result.outcomes])
        metrics.HTTP_REQUESTS.labels(route=route, status="200").inc()
        return JSONResponse({"accepted": len(alerts), "incidents": result.incident_ids,
                             "outcomes": result.counts()})

    @staticmethod
    def _count(alerts: Sequence[Alert], outcomes: Sequence[PlanOutcome]) -> None:
        for alert, outcome in zip(alerts, outcomes, strict=True):
            counter = metrics.ALERTS_DEDUPLICATED if outcome is PlanOutcome.DUPLICATE else (
                metrics.ALERTS_RECEIVED)
            counter.labels(source=alert.source).inc()


def readiness(stores: Stores, heartbeats: Heartbeats | None,
              replica: str) -> tuple[int, dict[str, Any]]:
    """``/readyz``: Redis answers PING *and* takes a write (out of memory, read-only and
    MISCONF answer PING), and every background loop made progress within its grace
    (``bot.core.heartbeat``); 503 with each reason otherwise."""
    body: dict[str, Any] = {"status": "ok", "redis": "ok"}
    try:
        stores.ping()
        stores.write_probe(replica)
        metrics.REDIS_ACCEPTING.set(1)
    except RedisError as exc:
        why = refusal(exc) or "error"
        metrics.refused(why, "readyz")
        metrics.REDIS_ACCEPTING.set(0)
        body.update(status="unavailable", redis=f"{why}: {str(exc)[:200]}")
    stuck = heartbeats.stuck() if heartbeats is not None else []
    if stuck:
        body.update(status="unavailable", loops=[s.line() for s in stuck])
    return (200 if body["status"] == "ok" else 503), body


def _health_routes(stores: Stores, store: IncidentStore,
                   heartbeats: Heartbeats | None) -> list[Route]:
    replica = f"{socket.gethostname()}:{os.getpid()}"

    async def healthz(_: Request) -> Response:
        return JSONResponse({"status": "ok"})

    async def readyz(_: Request) -> Response:
        status, body = await run_in_threadpool(readiness, stores, heartbeats, replica)
        return JSONResponse(body, status, headers={"Retry-After": str(RETRY_AFTER_S)}
                            if status == 503 else None)

    async def openapi_endpoint(_: Request) -> Response:
        return JSONResponse(openapi.DOCUMENT)

    async def metrics_endpoint(_: Request) -> Response:
        if heartbeats is not None:
            metrics.set_loop_ages(heartbeats.ages())
        with contextlib.suppress(RedisError):
            metrics.set_incident_counts(await run_in_threadpool(store.counts_by_state))
            await run_in_threadpool(refresh_job_metrics, stores.jobs())
        body, content_type = metrics.render()
        return Response(body, media_type=content_type)

    return [Route("/healthz", healthz, methods=["GET"]), Route("/readyz", readyz, methods=["GET"]),
            Route("/metrics", metrics_endpoint, methods=["GET"]),
            Route("/openapi.json", openapi_endpoint, methods=["GET"])]


async def _run_hooks(hooks: Sequence[Hook]) -> None:
    for hook in hooks:
        result = hook()
        if inspect.isawaitable(result):
            await result


def _lifespan(on_startup: Sequence[Hook], on_shutdown: Sequence[Hook]) -> Any:
    @contextlib.asynccontextmanager
    async def lifespan(_: Starlette) -> AsyncIterator[None]:
        await _run_hooks(on_startup)
        try:
            yield
        finally:
            await _run_hooks(on_shutdown)

    return lifespan


def create_app(settings: Settings, stores: Stores, *, extra_routes: Sequence[BaseRoute] = (),
               on_startup: Sequence[Hook] = (), on_shutdown: Sequence[Hook] = (),
               store: IncidentStore | None = None,
               heartbeats: Heartbeats | None = None) -> Starlette:
    """The ASGI app. ``extra_routes`` is where the chat side mounts ``/slack/events``;
    ``heartbeats`` are the background loops ``/readyz`` answers for (none: alerts only)."""
    inventory = {name: host.ssh for name, host in settings.hosts.items()}
    try:
        mapper = Mapper(settings.alerts.kinds, inventory)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    store = store or stores.incidents(group_wait_s=settings.alerts.group_wait_s,
                                      xid_policy=xid_policy_from_extra(settings.extra))
    if settings.incident_bot_alert_token is None:
        log.warning("INCIDENT_BOT_ALERT_TOKEN is not set: every alert webhook call gets 401")
    alerts = AlertEndpoints(settings, store, mapper)
    routes: list[BaseRoute] = [
        Route("/alerts/alertmanager", alerts.alertmanager, methods=["POST"]),
        Route("/alerts", alerts.generic, methods=["POST"]),
        *_health_routes(stores, store, heartbeats),
        *extra_routes,
    ]
    app = Starlette(routes=routes, lifespan=_lifespan(on_startup, on_shutdown))
    app.state.store = store
    return app
