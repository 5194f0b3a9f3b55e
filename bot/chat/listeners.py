"""Bolt listeners for buttons, the deny modal and ``/ir``: ack at once, work in a pool.

Each listener hands its work to an executor *before* acking (so a drain after the HTTP
answer sees it), then ``ack()``s: Slack wants an answer within 3 s, and the claim and
ephemerals can take longer. The clicked message in the payload is never used to render
anything: the flow re-renders from stored state (the desk queued the click for it on the
events stream), and the clicker hears back privately (an ephemeral) with what the desk
knew at the claim or the refusal's reason; what only the flow knows it says later.
"""

from __future__ import annotations

import json
import logging
import re
import threading
from collections.abc import Callable
from concurrent.futures import Executor, Future, wait
from dataclasses import dataclass
from typing import Any

from slack_bolt import App

from bot.chat import slash as slash_mod
from bot.chat.base import ChatSendError, Ephemeral
from bot.chat.blockkit import DENY_CALLBACK, REASON_BLOCK, REASON_INPUT, deny_modal
from bot.chat.click_check import MessageCheck
from bot.chat.interactions import ApprovalDesk, Decision
from bot.chat.slack import ChatDeliveryError, SlackBackend
from bot.chat.text import visible
from bot.core import metrics, strings
from bot.core.errors import log_internal
from bot.domain.validate import INCIDENT_ID
from storage.connection import refusal

APPROVE_RE = re.compile(r"^(approve|revert)(:\d+)?$")
DENY_RE = re.compile(r"^deny(:\d+)?$")
INCIDENT_RE = re.compile(r"^incident_(ack|resolve|snooze|retry|escalate)(:\d+)?$")
EVIDENCE_RE = re.compile(r"^evidence(:\d+)?$")
RUNBOOK_RE = re.compile(r"^runbook(:\d+)?$")
log = logging.getLogger(__name__)
INCIDENT_VALUE_RE = re.compile(rf"^({INCIDENT_ID})(?:\|(\d{{1,7}}))?$")


@dataclass(frozen=True)
class Click:
    """The parts of a block_actions payload we use."""

    user: str
    value: str
    channel: str
    ts: str
    trigger_id: str
    action_id: str = ""

    @classmethod
    def from_body(cls, body: dict[str, Any]) -> Click:
        action = _obj((body.get("actions") or [{}])[0])
        container, message = _obj(body.get("container")), _obj(body.get("message"))
        return cls(
            user=_id_of(body.get("user")),
            value=str(action.get("value", "")),
            channel=_id_of(body.get("channel")) or str(container.get("channel_id") or ""),
            ts=str(container.get("message_ts") or message.get("ts", "")),
            trigger_id=str(body.get("trigger_id", "")),
            action_id=str(action.get("action_id", "")),
        )


class Listeners:
    """Bolt listeners: ack, then work in ``executor``."""

    def __init__(
        self,
        desk: ApprovalDesk,
        backend: SlackBackend,
        handlers: slash_mod.SlashHandlers,
        command: str,
        executor: Executor,
        *,
        messages: MessageCheck | None = None,
    ) -> None:
        self.desk, self.backend, self.handlers = desk, backend, handlers
        self.command, self.executor = command, executor
        self.messages = messages  # each click held against the message it came from
        self._inflight: set[Future[None]] = set()
        self._lock = threading.Lock()

    def register(self, app: App) -> None:
        app.action(APPROVE_RE)(self.approve)
        app.action(DENY_RE)(self.deny)
        app.action(INCIDENT_RE)(self.incident)
        app.action(EVIDENCE_RE)(self.evidence)
        app.action(RUNBOOK_RE)(self.runbook)
        app.view(DENY_CALLBACK)(self.deny_submit)
        app.command(self.command)(self.slash)
        app.event("app_mention")(self.mention)

    def runbook(self, ack: Callable[..., None]) -> None:
        """A runbook link button: Slack opens the URL; the click only needs its ack."""
        ack()

    def mention(self, ack: Callable[..., None]) -> None:
        """An @mention: acknowledged (the bot answers through ``/ir`` and its buttons)."""
        ack()

    def _submit(self, fn: Callable[..., None], *args: Any, tell: Click | None = None) -> None:
        """Run ``fn`` in the pool; on a crash, log it with an id and tell the clicker that id."""

        def run() -> None:
            try:
                fn(*args)
            except Exception as exc:  # a worker must survive one bad request
                why = refusal(exc)
                if why is not None:  # Redis said "not now": not a bug, and nothing was done
                    metrics.refused(why, "slack")
                    log.warning("slack listener %s: Redis refused (%s): %s", fn.__name__,
                                why, exc)
                    text = strings.STORE_UNAVAILABLE_CLICK
                elif isinstance(exc, ChatDeliveryError | ChatSendError):  # Slack said no
                    log.warning("slack listener %s: Slack refused: %s", fn.__name__, exc)
                    text = strings.SLACK_UNAVAILABLE_CLICK
                else:
                    error_id = log_internal(exc, f"slack listener {fn.__name__}")
                    text = strings.INTERNAL_ERROR.format(error_id=error_id)
                if tell is not None and tell.channel and tell.user:
                    self._say(Ephemeral(user=tell.user, text=text, channel=tell.channel))

        future = self.executor.submit(run)
        with self._lock:
            self._inflight.add(future)
        future.add_done_callback(self._done)

    def _done(self, future: Future[None]) -> None:
        with self._lock:
            self._inflight.discard(future)

    def wait_idle(self, timeout_s: float = 10.0) -> bool:
        """Wait for every handed-off piece of work (tests, graceful shutdown)."""
        with self._lock:
            pending = set(self._inflight)
        return not wait(pending, timeout=timeout_s).not_done

    def approve(self, ack: Callable[..., None], body: dict[str, Any]) -> None:
        click = Click.from_body(body)
        self._submit(self._approve, click, tell=click)
        ack()

    def _approve(self, click: Click) -> None:
        if (refused := self._elsewhere(click)) is not None:
            self._tell(click, refused)
            return
        self._answer(click, self.desk.approve(click.value, click.user))

    def _elsewhere(self, click: Click) -> str | None:
        """The refusal when the clicked approval's buttons are on another message."""
        if self.messages is None:
            return None
        return self.messages.approval(click.value, click.user, click.channel, click.ts)

    def deny(self, ack: Callable[..., None], body: dict[str, Any]) -> None:
        click = Click.from_body(body)
        self._submit(self._deny_click, click, tell=click)
        ack()

    def _deny_click(self, click: Click) -> None:
        if (refused := self._elsewhere(click)) is not None:
            self._tell(click, refused)
            return
        decision = self.desk.check(click.value, click.user)
        if decision is not None:
            self._answer(click, decision)
            return
        current = self.desk.store.get(click.value)
        kind = current.kind if current is not None else ""
        self.backend.open_modal(
            click.trigger_id, deny_modal(click.value, click.channel, click.ts, kind)
        )

    def incident(self, ack: Callable[..., None], body: dict[str, Any]) -> None:
        click = Click.from_body(body)
        self._submit(self._incident, click, tell=click)
        ack()

    def _incident(self, click: Click) -> None:
        verb = INCIDENT_RE.match(click.action_id)
        value = INCIDENT_VALUE_RE.match(click.value)
        if verb is None or value is None:
            self._tell(click, strings.APPROVAL_NOT_FOUND)
            return
        if self.messages is not None and (refused := self.messages.incident(
                value.group(1), click.user, click.channel, click.ts)) is not None:
            self._tell(click, refused, value.group(1))
            return
        text = self.desk.incident(verb.group(1), value.group(1), click.user,
                                  int(value.group(2) or 0), channel=click.channel)
        if text:  # "": queued, the flow answers once it applied it
            self._tell(click, text, value.group(1))

    def evidence(self, ack: Callable[..., None], body: dict[str, Any]) -> None:
        click = Click.from_body(body)
        self._submit(self._evidence, click, tell=click)
        ack()

    def _evidence(self, click: Click) -> None:
        """The raw probe output goes in the thread; the clicker hears where (or why not)."""
        value = INCIDENT_VALUE_RE.match(click.value)
        if value is None or value.group(2) is not None:
            self._tell(click, strings.INCIDENT_UNKNOWN.format(id=_safe(click.value)))
            return
        self._tell(click, self.handlers.evidence(click.user, value.group(1)).text, value.group(1))

    def deny_submit(
        self, ack: Callable[..., None], body: dict[str, Any], view: dict[str, Any]
    ) -> None:
        values = _obj(_obj(_obj(view.get("state")).get("values")).get(REASON_BLOCK))
        reason = str(_obj(values.get(REASON_INPUT)).get("value") or "").strip()
        if len(reason) < 3:
            ack(response_action="errors", errors={REASON_BLOCK: strings.DENY_REASON_REQUIRED})
            return
        meta = _metadata(str(view.get("private_metadata") or ""))
        user = _id_of(body.get("user"))
        tell = Click(user, meta.get("approval_id", ""), meta.get("channel", ""),
                     meta.get("ts", ""), "")
        self._submit(self._deny_submit, tell, reason, tell=tell)
        ack()

    def _deny_submit(self, click: Click, reason: str) -> None:
        if (refused := self._elsewhere(click)) is not None:  # the modal's click, held again
            self._tell(click, refused)
            return
        self._answer(click, self.desk.deny(click.value, click.user, reason))

    def _answer(self, click: Click, decision: Decision) -> None:
        """Tell the clicker privately; the flow re-renders the message from stored state."""
        self._tell(click, decision.text,
                   decision.approval.incident_id if decision.approval else "")

    def _tell(self, click: Click, text: str, incident_id: str = "") -> None:
        if click.channel and click.user:  # no user: refused and audited, nobody to tell
            self._say(Ephemeral(user=click.user, text=text, channel=click.channel,
                                extra={"incident_id": incident_id}))

    def _say(self, note: Ephemeral) -> None:
        """The private answer, when Slack takes it: a Slack outage loses the ephemeral
        (the decision stands and the message shows it), it is not an error of ours."""
        try:
            self.backend.ephemeral(note)
        except (ChatDeliveryError, ChatSendError) as exc:
            log.warning("could not tell %s privately (Slack refused): %s", note.user, exc)

    def slash(
        self, ack: Callable[..., None], body: dict[str, Any], respond: Callable[..., Any]
    ) -> None:
        try:
            cmd = slash_mod.parse(str(body.get("text", "")), self.command)
        except slash_mod.UsageError as exc:
            ack(text=visible(str(exc)), response_type="ephemeral")
            return
        user = str(body.get("user_id", ""))
        if isinstance(cmd, slash_mod.Help):
            help_text = slash_mod.run(cmd, self.handlers, user, self.command).text
            ack(text=visible(help_text), response_type="ephemeral")
            return
        self._submit(self._slash, cmd, user, respond, str(body.get("channel_id", "")))
        ack()

    def _slash(self, cmd: slash_mod.SlashCommand, user: str, respond: Callable[..., Any],
               channel: str = "") -> None:
        try:
            reply = slash_mod.run(cmd, self.handlers, user, self.command,
                                  guard=self.desk.refusal, channel=channel)
        except Exception as exc:  # answer the person with an id to quote
            why = refusal(exc)
            if why is not None:  # Redis said "not now": nothing was done, say so
                metrics.refused(why, "slack")
                reply = slash_mod.SlashReply(strings.STORE_UNAVAILABLE_CLICK)
            else:
                reply = slash_mod.SlashReply(
                    strings.INTERNAL_ERROR.format(error_id=log_internal(exc, "slash")))
        if not reply.text:  # an incident verb queued: the flow answers privately
            return
        respond(text=visible(reply.text),
                response_type="in_channel" if reply.in_channel else "ephemeral")


def _obj(value: Any) -> dict[str, Any]:
    """A payload part that should be an object: anything else reads as empty."""
    return value if isinstance(value, dict) else {}


def _id_of(value: Any) -> str:
    """Slack's ``user``/``channel``: an object with an ``id``, or (in some events) the id."""
    return value if isinstance(value, str) else str(_obj(value).get("id") or "")


def _safe(text: str) -> str:
    """A clicked value echoed back: short and without Slack control characters."""
    return "".join(c for c in text[:40] if c.isalnum() or c in "-_")


def _metadata(raw: str) -> dict[str, str]:
    try:
        data = json.loads(raw or "{}")
    except (ValueError, RecursionError):
        return {}
    return {k: str(v) for k, v in data.items()} if isinstance(data, dict) else {}
