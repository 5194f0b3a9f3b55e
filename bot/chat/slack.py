"""The Slack chat backend over ``slack_sdk.WebClient`` (base URL from settings).

Retries are slack_sdk's own handlers, on the calls whose caller may wait
(``bot/chat/slack_retry.py`` says which and why); the durable outbox's sends are one
attempt each and never sleep. A call that finally fails is logged and audited, never
dropped silently. Edits of one message are coalesced (``UpdateCoalescer``): at most one
``chat.update`` per interval.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Any
from urllib.error import URLError

from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError, SlackClientError
from slack_sdk.web import SlackResponse

from bot.chat.base import ChatMessage, ChatSendError, Ephemeral, MessageRef
from bot.chat.blockkit import to_payload
from bot.chat.coalesce import (
    UpdateCoalescer,
    budget_gate,
    hold_on_limit,
    raise_on_429,
    wait_turn,
)
from bot.chat.interactions import AuditFn
from bot.chat.slack_retry import (
    RETRYABLE_ERRORS,
    editing_handlers,
    retries_so_far,
    start_counting,
    waiting_handlers,
    with_handlers,
)
from bot.chat.text import clip, visible, visible_payload
from bot.config.settings import Settings, secret
from bot.core import metrics, strings
from storage.renders import RenderLedger
from storage.slack_budget import BudgetSettings, SlackBudget, workspace_of
from storage.stores import Stores

log = logging.getLogger(__name__)

OUTBOX_EVENT = "incident_bot_outbox"  # message metadata tagging a post with its outbox key
FIND_PAGES = 5  # 1,000 messages: a lookup is one attempt, at Tier 3's 50 a minute
BUDGET_WAIT = "slack budget"  # the shared budget's spacing, not a refusal by Slack


class ChatDeliveryError(RuntimeError):
    """A Web API call that still failed after its retries (already logged and audited)."""

    def __init__(self, method: str, attempts: int, error: str) -> None:
        super().__init__(
            strings.CHAT_DELIVERY_FAILED.format(method=method, attempts=attempts, error=error)
        )
        self.method, self.attempts, self.error = method, attempts, error


def make_client(settings: Settings, timeout_s: int = 10) -> WebClient:
    """A WebClient on the configured API URL with no retry handler: one attempt per call
    (the outbox's; ``SlackBackend`` adds slack_sdk's handlers where a caller may wait)."""
    base = settings.slack.api_url.rstrip("/") + "/"
    return WebClient(
        token=secret(settings.slack_bot_token), base_url=base, timeout=timeout_s, retry_handlers=[]
    )


def retry_after(response: Any, default: float = 1.0) -> float:
    headers = getattr(response, "headers", {}) or {}
    raw = headers.get("Retry-After", headers.get("retry-after"))
    if isinstance(raw, list):
        raw = raw[0] if raw else None
    try:
        return max(0.0, float(raw)) if raw is not None else default
    except ValueError:
        return default


def shared_backend(client: WebClient, stores: Stores, *, audit: AuditFn | None = None,
                   update_interval_s: float = 2.0) -> SlackBackend:
    """The backend ``serve`` runs: the Slack budget of this workspace and the render
    ledger are in Redis, shared by every replica."""
    budget = stores.slack_budget(workspace_of(client.token),
                                 BudgetSettings(message_interval_s=update_interval_s))
    return SlackBackend(client, audit=audit, update_interval_s=update_interval_s,
                        budget=budget, ledger=stores.renders())


class SlackBackend:
    """``ChatBackend`` for Slack, plus what the Slack app needs (modals, raw edits)."""

    def __init__(
        self,
        client: WebClient,
        *,
        audit: AuditFn | None = None,
        update_interval_s: float = 2.0,
        attempts: int = 4,
        budget: SlackBudget | None = None,
        ledger: RenderLedger | None = None,
    ) -> None:
        """``budget`` and ``ledger`` are shared by every replica (``shared_backend``);
        without them the spacing and the render order hold in this process only.
        ``client`` makes one attempt per call (the outbox's); ``waiting`` and ``editing``
        are the same client with slack_sdk's retry handlers (``bot/chat/slack_retry.py``)."""
        self.client, self._audit = client, audit
        self.waiting = with_handlers(client, waiting_handlers(attempts))
        self.editing = with_handlers(client, editing_handlers(attempts))
        self.budget = budget
        self.on_change: Callable[[], None] | None = None  # the App Home's refresher pokes here
        self.ledger = ledger
        self.updates = UpdateCoalescer(
            self._send_update, update_interval_s, budget_gate(budget) if budget else None,
            _newer, hold_on_limit(budget) if budget else None)

    def post(
        self, channel: str, message: ChatMessage, thread: MessageRef | None = None
    ) -> MessageRef:
        args: dict[str, Any] = {"channel": channel, **to_payload(message)}
        if thread is not None:
            args["thread_ts"] = thread.ts
        sent: list[SlackResponse] = []

        if (budget := self.budget) is not None:  # about 1 post/s per channel, all replicas
            wait_turn(lambda: budget.try_post(channel))

        def send() -> None:
            sent.append(
                self._call(
                    "chat.postMessage",
                    message.incident_id,
                    lambda: self.waiting.chat_postMessage(**args),
                )
            )

        if message.seq and self.ledger is not None and message.incident_id:
            self.ledger.send_if_newer(message.incident_id, message.seq, send)
        else:
            send()
        if not sent:
            raise ChatDeliveryError("chat.postMessage", 0, "a newer render was already posted")
        self._changed()
        return MessageRef(channel=str(sent[0]["channel"]), ts=str(sent[0]["ts"]))

    def update(self, ref: MessageRef, message: ChatMessage) -> None:
        """Queue an edit; sent at most once per interval per message, newest render wins."""
        self.updates.submit(ref, (message.incident_id, to_payload(message), message.seq))
        self._changed()

    def _changed(self) -> None:
        """A message was posted or edited: what the App Home shows may differ now."""
        if self.on_change is not None:
            self.on_change()

    def ephemeral(self, note: Ephemeral) -> None:
        self._call(
            "chat.postEphemeral",
            note.extra.get("incident_id", ""),
            lambda: self.waiting.chat_postEphemeral(
                channel=note.channel, user=note.user, text=visible(note.text)
            ),
        )

    def upload(self, ref: MessageRef, path: Path, title: str) -> None:
        self._call(
            "files.uploadV2",
            "",
            lambda: self.waiting.files_upload_v2(
                channel=ref.channel,
                thread_ts=ref.ts,
                file=str(path),
                title=visible(title),
                filename=path.name,
            ),
        )

    def open_modal(self, trigger_id: str, view: dict[str, Any]) -> None:
        self._call(
            "views.open", "",
            lambda: self.waiting.views_open(trigger_id=trigger_id, view=visible_payload(view))
        )

    def fetch_message(self, ref: MessageRef) -> dict[str, Any] | None:
        """The posted message (blocks included), from ``conversations.replies``."""
        resp = self._call(
            "conversations.replies",
            "",
            lambda: self.waiting.conversations_replies(
                channel=ref.channel, ts=ref.ts, limit=1, inclusive=True
            ),
        )
        messages = resp.get("messages") or []
        return dict(messages[0]) if messages else None

    def flush(self, timeout_s: float = 30.0) -> bool:
        return self.updates.flush(timeout_s)

    def close(self, timeout_s: float = 30.0) -> None:
        self.updates.close(timeout_s)

    def _send_update(self, ref: MessageRef, item: tuple[str, dict[str, Any], int]) -> None:
        """Send one edit; an incident render older than the last one applied is dropped."""
        incident_id, payload, seq = item

        def send() -> None:
            self._call(
                "chat.update",
                incident_id,
                raise_on_429(
                    lambda: self.editing.chat_update(channel=ref.channel, ts=ref.ts, **payload)
                ),
            )

        if seq and self.ledger is not None and incident_id:
            if not self.ledger.send_if_newer(incident_id, seq, send):
                log.info("dropped render %s of incident %s: a newer one was sent", seq, incident_id)
            return
        send()

    # --- one attempt each, for the durable outbox (issue 24) -------------------------
    def post_once(self, channel: str, message: ChatMessage, thread: MessageRef | None,
                  key: str) -> MessageRef:
        """One ``chat.postMessage``, no sleeping: a refusal raises ``ChatSendError``. The post
        carries ``key`` in its metadata so ``find_posted`` can tell whether a post whose
        response was lost reached the channel after all."""
        if self.budget is not None and (wait := self.budget.try_post(channel)) > 0:
            raise ChatSendError(BUDGET_WAIT, transient=True, retry_after_s=wait,
                                throttled=True)
        args: dict[str, Any] = {"channel": channel, **to_payload(message)}
        if thread is not None:
            args["thread_ts"] = thread.ts
        if key:
            args["metadata"] = {"event_type": OUTBOX_EVENT, "event_payload": {"key": key}}
        resp = self._once("chat.postMessage", lambda: self.client.chat_postMessage(**args))
        self._applied(message)
        self._changed()
        return MessageRef(channel=str(resp["channel"]), ts=str(resp["ts"]))

    def update_once(self, ref: MessageRef, message: ChatMessage, *,
                    urgent: bool = False, key: str = "") -> None:
        """One ``chat.update`` now (not coalesced), no sleeping; a refusal raises.
        ``urgent``: may take the tier's last call (``SlackBudget.try_update``). ``key``:
        the message's metadata is retagged with it (a lost incident's card taken over)."""
        if message.seq and self.ledger is not None and message.incident_id and \
                message.seq <= self.ledger.applied(message.incident_id):
            log.info("render %s of incident %s not sent: a newer one was", message.seq,
                     message.incident_id)
            return
        budget = self.budget
        if budget is not None and (wait := budget.try_update(ref.channel, ref.ts,
                                                             urgent=urgent)) > 0:
            raise ChatSendError(BUDGET_WAIT, transient=True, retry_after_s=wait,
                                throttled=True)
        payload: dict[str, Any] = to_payload(message)
        if key:
            payload["metadata"] = {"event_type": OUTBOX_EVENT, "event_payload": {"key": key}}
        try:
            self._once("chat.update",
                       lambda: self.client.chat_update(channel=ref.channel, ts=ref.ts, **payload))
        except ChatSendError as exc:
            if budget is not None and exc.retry_after_s:  # other replicas' edits wait too
                budget.hold_message(ref.channel, ref.ts, exc.retry_after_s)
            raise
        self._applied(message)
        self._changed()

    def _applied(self, message: ChatMessage) -> None:
        if message.seq and self.ledger is not None and message.incident_id:
            self.ledger.mark_applied(message.incident_id, message.seq)

    def find_posted(self, channel: str, thread: MessageRef | None, key: str,
                    oldest: float, *, prefix: bool = False) -> MessageRef | None:
        """The message an earlier post with ``key`` left in the channel (or the thread),
        if any: asked before posting again after a timeout. ``prefix``: the first (oldest)
        one whose key starts with ``key`` (a lost incident's card, issue 39). Up to
        ``FIND_PAGES`` pages are read: in a busy channel the post is not on the first."""
        pages = self._pages_since(channel, thread, oldest)
        if prefix and thread is None:  # its first post: history lists the newest first
            pages = iter([sorted((m for page in pages for m in page),
                                 key=lambda m: float(m.get("ts") or 0))])
        for page in pages:  # the next page is asked only while the post is not found
            for found in page:
                meta = found.get("metadata") or {}
                tag = str((meta.get("event_payload") or {}).get("key") or "")
                if meta.get("event_type") == OUTBOX_EVENT and tag and (
                        tag.startswith(key) if prefix else tag == key):
                    return MessageRef(channel=channel, ts=str(found["ts"]))
        return None

    def _pages_since(self, channel: str, thread: MessageRef | None,
                     oldest: float) -> Iterator[list[dict[str, Any]]]:
        """The thread's messages (oldest first), or the channel's top level since
        ``oldest`` (less a minute, for clocks; newest first), page by page as asked,
        following Slack's cursor for at most ``FIND_PAGES`` pages."""
        def call(cursor: str) -> SlackResponse:
            if thread is not None:
                return self.client.conversations_replies(
                    channel=channel, ts=thread.ts, include_all_metadata=True, limit=200,
                    cursor=cursor or None)
            return self.client.conversations_history(
                channel=channel, oldest=f"{max(0.0, oldest - 60):.6f}",
                include_all_metadata=True, limit=200, cursor=cursor or None)
        cursor = ""
        for _ in range(FIND_PAGES):
            page = self._once("conversations.history", partial(call, cursor))
            yield list(page.get("messages") or [])
            cursor = str((page.get("response_metadata") or {}).get("next_cursor") or "")
            if not cursor:
                return

    def _once(self, method: str, call: Callable[[], SlackResponse]) -> SlackResponse:
        try:
            return call()
        except Exception as exc:  # every failure is classified, none escapes unnamed
            failure = classify(exc)
            if failure is None:
                raise
            metrics.SLACK_API_ERRORS.labels(method=method, error=clip(failure.error, 40)).inc()
            raise failure from None

    def _call(
        self, method: str, incident_id: str, call: Callable[[], SlackResponse]
    ) -> SlackResponse:
        """One call through a client with slack_sdk's retry handlers; a failure left once
        they gave up is logged and audited with the attempts made, then raised."""
        start_counting()
        try:
            return call()
        except Exception as exc:  # classified: a Slack or network failure, else not ours
            failure = classify(exc)
            if failure is None:
                raise
            error = ChatDeliveryError(method, retries_so_far() + 1, clip(failure.error, 300))
        metrics.SLACK_API_ERRORS.labels(method=method, error=clip(error.error, 40)).inc()
        log.error("slack delivery failed: %s", error)
        if self._audit is not None:
            try:
                detail = {"method": error.method, "attempts": error.attempts, "error": error.error}
                self._audit(incident_id, "bot", "chat.delivery_failed", detail)
            except Exception:  # both Slack and the audit failed: the log has it
                log.exception("could not audit a failed Slack call")
        raise error


def classify(exc: BaseException) -> ChatSendError | None:
    """A Web API failure in the outbox's terms (None: not a Slack or network failure)."""
    if isinstance(exc, SlackApiError):
        resp = exc.response
        status = int(getattr(resp, "status_code", 0) or 0)
        error = str(resp.get("error", "")) if hasattr(resp, "get") else ""
        reason = error or f"HTTP {status}"
        if status == 429 or error == "ratelimited":
            return ChatSendError(reason, transient=True, retry_after_s=retry_after(resp))
        return ChatSendError(reason, transient=status >= 500 or error in RETRYABLE_ERRORS)
    if isinstance(exc, ConnectionRefusedError) or (
            isinstance(exc, URLError) and isinstance(exc.reason, ConnectionRefusedError)):
        return ChatSendError(f"{type(exc).__name__}: {exc}", transient=True)  # never sent
    if isinstance(exc, (SlackClientError, OSError)):  # timeout, reset: it may have arrived
        return ChatSendError(clip(f"{type(exc).__name__}: {exc}", 300), transient=True,
                             uncertain=True)
    return None


def _newer(new: tuple[str, Any, int], queued: tuple[str, Any, int]) -> bool:
    """A queued edit is replaced only by a render at least as new (unnumbered: always)."""
    return not (new[2] and queued[2]) or new[2] >= queued[2]


class SlackGroups:
    """Usergroup membership from ``usergroups.users.list``, cached for ``ttl_s``."""

    def __init__(self, client: WebClient, ttl_s: float = 300.0) -> None:
        self.client, self.ttl_s = with_handlers(client, waiting_handlers()), ttl_s
        self._cache: dict[str, tuple[float, frozenset[str]]] = {}
        self._lock = threading.Lock()

    def groups_of(self, user: str, groups: frozenset[str]) -> frozenset[str]:
        return frozenset(g for g in groups if user in self._members(g))

    def _members(self, group: str) -> frozenset[str]:
        now = time.monotonic()
        with self._lock:
            hit = self._cache.get(group)
        if hit is not None and now - hit[0] < self.ttl_s:
            return hit[1]
        resp = self.client.usergroups_users_list(usergroup=group)
        members = frozenset(str(u) for u in resp.get("users") or [])
        with self._lock:
            self._cache[group] = (now, members)
        return members
