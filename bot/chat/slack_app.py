"""The slack-bolt app: buttons, the deny modal and ``/ir``, mounted at ``/slack/events``.

Every listener ``ack()``s at once (Slack wants an answer within 3 s) and hands the work
to an executor: the claim in Redis (its click event for the flow queued with it),
ephemerals and message edits. Bolt verifies each request's signature and rejects stale
ones (over 5 minutes) before any listener runs. In HTTP mode ``bot.chat.slack_edge``
stands before Bolt: the body is read under a cap, its signature checked, and its shape, so
nothing unsigned is parsed. HTTP mode mounts in the bot's Starlette service (several replicas behind
a load balancer are fine: claims are atomic in Redis); Socket Mode is used when
``SLACK_APP_TOKEN`` is set and no public URL exists.

A signed request is accepted once (issue 39): its timestamp and signature are claimed in
Redis (``SeenRequests``) for as long as the signature is valid, so the same bytes sent
again within Slack's five minutes (an approver's ``/ir silence …`` replayed after the
silence was removed) are refused, 401 like Bolt's own verification failures, with
``X-Slack-No-Retry``; an Events API retry of a request already taken (Slack's own, with
``X-Slack-Retry-Num``) gets its 200 without being handled again. Redis refusing the claim
is a 503 with ``Retry-After``: nothing was handled.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from slack_bolt import App, BoltResponse
from slack_bolt.adapter.starlette.handler import to_bolt_request, to_starlette_response
from slack_bolt.authorization import AuthorizeResult
from slack_sdk import WebClient
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from bot.chat import slack_edge
from bot.chat import slash as slash_mod
from bot.chat.click_check import MessageCheck
from bot.chat.home_tab import FleetSource, HomePublisher, HomeRefresher, register_home
from bot.chat.interactions import (
    ApprovalDesk,
    AuditFn,
    GroupResolver,
    audit_sink,
)
from bot.chat.listeners import Listeners
from bot.chat.slack import SlackBackend, SlackGroups, make_client, shared_backend
from bot.config.policy import policy_from_settings
from bot.config.settings import Settings, secret
from bot.core import metrics, strings
from bot.core.bodies import BadLength, BodyTooLarge, BodyTooSlow, read_capped
from bot.core.errors import ConfigError, log_internal
from storage import keys
from storage.claims import Claims
from storage.connection import StorageError, refusal
from storage.slack_budget import workspace_of
from storage.stores import Stores

log = logging.getLogger(__name__)

MAX_BODY_BYTES = 1_048_576
BODY_TIMEOUT_S = 30.0
RETRY_AFTER_S = 5


class SeenRequests:
    """Signed Slack requests accepted once: ``(timestamp, signature)`` claimed (``SET NX``,
    ``storage/claims.py``) until the signature's window closes."""

    def __init__(self, claims: Claims, clock: Callable[[], float] = time.time) -> None:
        self.claims = claims
        self.clock = clock

    def first(self, stamp: str, signature: str) -> bool:
        """True the first time this signed request is seen; raises ``StorageError``."""
        ttl = max(1.0, int(stamp) + slack_edge.MAX_SKEW_S + 5 - self.clock())
        return self.claims.claim(keys.slack_request(stamp, signature), "1", ttl)


@dataclass
class SlackApp:
    """Everything the Slack side needs, built once per process."""

    bolt: App
    backend: SlackBackend
    desk: ApprovalDesk
    executor: ThreadPoolExecutor
    listeners: Listeners
    home: HomePublisher | None = None  # the App Home; ``home.refresh()`` on a change
    refresher: HomeRefresher | None = None  # pokes ``home.refresh`` on every chat change
    signing_secret: str = ""  # checked by ``slack_edge`` before Bolt reads the body
    body_timeout_s: float = BODY_TIMEOUT_S  # ``http.body_timeout_s``
    seen: SeenRequests | None = None  # each signed request accepted once
    socket_token: str | None = None  # Socket Mode's xapp- token, when it is wanted
    socket: Any = None  # the connected Socket Mode handler (``start``)

    def routes(self, path: str = "/slack/events") -> list[Route]:
        return slack_routes(self.bolt, path, self.signing_secret,
                            body_timeout_s=self.body_timeout_s, seen=self.seen)

    def http_routes(self) -> list[Route]:
        """What the bot's HTTP service mounts: ``/slack/events``, none over Socket Mode."""
        return [] if self.socket_token else self.routes()

    def start(self) -> None:
        """Connect over Socket Mode when it is wanted (no public URL), without blocking."""
        if self.socket_token and self.socket is None:
            from slack_bolt.adapter.socket_mode import SocketModeHandler

            self.socket = SocketModeHandler(app=self.bolt, app_token=self.socket_token)
            self.socket.connect()

    def drain(self, timeout_s: float = 10.0) -> None:
        """Wait for queued listener work and message edits (tests, shutdown)."""
        self.listeners.wait_idle(timeout_s)
        self.backend.flush(timeout_s)

    def close(self) -> None:
        if self.socket is not None:
            self.socket.close()
        if self.refresher is not None:
            self.refresher.close()
        self.executor.shutdown(wait=True)
        self.backend.close()


def create_slack_app(
    settings: Settings,
    stores: Stores,
    *,
    slash: slash_mod.SlashHandlers | None = None,
    audit: AuditFn | None = None,
    client: WebClient | None = None,
    groups: GroupResolver | None = None,
    workers: int = 8,
    update_interval_s: float = 2.0,
    clock: Callable[[], float] = time.time,
    backend: SlackBackend | None = None,
    desk: ApprovalDesk | None = None,
    home: FleetSource | None = None,
) -> SlackApp:
    """Wire store, policy, backend and bolt from settings; the desk queues its decisions on
    the incident events stream for the flow (it never calls the flow).

    ``bot.service`` passes the backend and desk it built first (the flow needs both)."""
    signing_secret = secret(settings.slack_signing_secret)
    if not signing_secret:
        raise ConfigError("SLACK_SIGNING_SECRET is not set: Slack requests cannot be verified")
    if client is None and backend is None and not secret(settings.slack_bot_token):
        raise ConfigError("SLACK_BOT_TOKEN is not set: the bot cannot post to Slack")
    client = client or (backend.client if backend is not None else make_client(settings))
    backend = backend or shared_backend(
        client, stores, audit=audit, update_interval_s=update_interval_s
    )
    desk = desk or ApprovalDesk(
        stores.approvals(),
        policy_from_settings(settings),
        stores.events(),
        audit=audit,
        groups=groups or SlackGroups(client),
        clock=clock,
    )
    bolt = App(
        signing_secret=signing_secret,
        client=_tokenless(client),
        authorize=_from_configured_token(client.token or ""),
        process_before_response=False,
        name="incident-bot",
    )
    bolt.error(_our_bug)
    executor = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="slack-work")
    listeners = Listeners(
        desk, backend, slash or slash_mod.Unavailable(), settings.slack.slash_command, executor,
        messages=MessageCheck(stores.approvals(), stores.incidents(),
                              audit or audit_sink(stores.audit()), storms=stores.storms(),
                              outbox=stores.chat_outbox()))
    listeners.register(bolt)
    publisher = refresher = None
    if home is not None:  # the App Home tab: app_home_opened → views.publish
        viewers = stores.home_viewers(workspace_of(client.token))
        publisher = HomePublisher(backend.waiting, home, viewers, backend.budget, clock)
        refresher = HomeRefresher(publisher, min_interval_s=update_interval_s)
        register_home(bolt, publisher, executor, refresher)
        backend.on_change = refresher.poke
    socket_token = None
    if socket_mode_wanted(settings):
        socket_token = secret(settings.slack_app_token)
        if not socket_token:
            raise ConfigError("Socket Mode needs SLACK_APP_TOKEN (an xapp- token)")
    return SlackApp(bolt, backend, desk, executor, listeners, publisher, refresher, signing_secret,
                    settings.http.body_timeout_s, SeenRequests(stores.claims(), clock),
                    socket_token)


def _tokenless(client: WebClient) -> WebClient:
    """The app's client without its token, for Bolt: a token in Bolt's client makes it
    authorize each replica's first request with an ``auth.test`` call, and when Slack is
    down or slow that request failed as our error (a 500). Bolt builds each request's client
    from this one (URL, timeout, retry handlers) and gives it the token ``authorize`` says."""
    return WebClient(token=None, base_url=client.base_url, timeout=client.timeout,
                     ssl=client.ssl, proxy=client.proxy, headers=dict(client.headers),
                     logger=client.logger, retry_handlers=list(client.retry_handlers))


def _from_configured_token(token: str) -> Callable[..., AuthorizeResult]:
    """One workspace, one configured bot token: authorized from configuration, with no call
    to Slack (``auth.test`` would only add the bot's own user id, which no listener uses:
    the bot handles clicks, commands, views and ``app_home_opened``, never its own
    messages). A Slack outage then delays what the listeners send, never the answer."""

    def authorize(enterprise_id: str | None, team_id: str | None,
                  user_id: str | None) -> AuthorizeResult:
        return AuthorizeResult(enterprise_id=enterprise_id, team_id=team_id, bot_token=token,
                               user_id=user_id)

    return authorize


def slack_routes(app: App, path: str = "/slack/events", signing_secret: str = "", *,
                 limit: int = MAX_BODY_BYTES, body_timeout_s: float = BODY_TIMEOUT_S,
                 clock: Callable[[], float] = time.time,
                 seen: SeenRequests | None = None) -> list[Route]:
    """Starlette routes for Bolt: size, signature and shape first (``slack_edge``), then
    once only (``seen``), then dispatch in a thread so the event loop never blocks."""

    async def events(request: Request) -> Response:
        try:
            body = await read_capped(request.headers.get("content-length"), request.stream(),
                                     limit, body_timeout_s)
        except BodyTooLarge:
            return _refuse(413, strings.SLACK_TOO_LARGE.format(limit=limit))
        except BodyTooSlow:
            return _refuse(408, strings.BODY_TOO_SLOW.format(seconds=body_timeout_s))
        except BadLength:
            return _refuse(400, strings.BAD_CONTENT_LENGTH)
        refusal = slack_edge.verify(signing_secret, request.headers, body, clock())
        if refusal is not None:
            return _refuse(refusal.status, refusal.reason)
        try:
            parsed = slack_edge.parse(body, request.headers.get("content-type"))
            bolt_request = to_bolt_request(request, body)
        except slack_edge.ShapeError as exc:
            return _refuse(400, str(exc))
        if seen is not None:
            again = await _seen_before(seen, request, parsed)
            if again is not None:
                return again
        bolt_response = await run_in_threadpool(app.dispatch, bolt_request)
        return to_starlette_response(bolt_response)

    return [Route(path, events, methods=["POST"])]


async def _seen_before(seen: SeenRequests, request: Request,
                       parsed: dict[str, Any]) -> Response | None:
    """None for a request's first delivery; else its answer: a replay (401), Slack's own
    retry of an event already taken (200), or Redis refusing the claim (503)."""
    stamp = request.headers.get("x-slack-request-timestamp", "")
    signature = request.headers.get("x-slack-signature", "")
    try:
        if await run_in_threadpool(seen.first, stamp, signature):
            return None
    except StorageError as exc:
        why = refusal(exc)
        if why is None:
            error_id = log_internal(exc, "slack request ledger")
            return _refuse(500, strings.INTERNAL_ERROR.format(error_id=error_id))
        metrics.refused(why, "slack")
        log.warning("slack request refused, Redis unavailable (%s): %s", why, exc)
        return JSONResponse({"error": strings.SLACK_STORE_UNAVAILABLE}, status_code=503,
                            headers={"Retry-After": str(RETRY_AFTER_S)})
    kind = str(parsed.get("type") or ("slash_command" if parsed.get("command") else "other"))
    metrics.SLACK_REPLAYS.labels(kind=kind).inc()
    if kind == "event_callback" and request.headers.get("x-slack-retry-num"):
        log.info("slack event retry of a request already taken: answered, not handled")
        return Response(status_code=200)
    log.warning("slack request replayed (%s, timestamp %s): refused", kind, stamp)
    return JSONResponse({"error": strings.SLACK_REPLAYED}, status_code=401,
                        headers={"X-Slack-No-Retry": "1"})


def _our_bug(error: Exception, response: BoltResponse | None) -> BoltResponse | None:
    """A crash inside Bolt or a listener's synchronous part: everything a request can get
    wrong was refused before dispatch, so this is ours; a 500 with an id to quote."""
    error_id = log_internal(error, "slack request")
    if response is None:
        return None
    body = json.dumps({"error": strings.INTERNAL_ERROR.format(error_id=error_id)})
    return BoltResponse(status=500, body=body, headers={"content-type": "application/json"})


def _refuse(status: int, reason: str) -> JSONResponse:
    log.info("slack request refused (%d): %s", status, reason)
    return JSONResponse({"error": reason}, status_code=status)


def socket_mode_wanted(settings: Settings) -> bool:
    if settings.slack.socket_mode is not None:
        return settings.slack.socket_mode
    return bool(secret(settings.slack_app_token))


def socket_mode_handler(app: SlackApp, settings: Settings) -> Any:
    """A Socket Mode handler on the app's WebClient (so the configured API URL is used)."""
    from slack_bolt.adapter.socket_mode import SocketModeHandler

    token = secret(settings.slack_app_token)
    if not token:
        raise ConfigError("Socket Mode needs SLACK_APP_TOKEN (an xapp- token)")
    return SocketModeHandler(app=app.bolt, app_token=token)
