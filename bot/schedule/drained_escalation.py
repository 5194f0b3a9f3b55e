"""Escalation for Slurm nodes the bot drained and nobody returned (issue 26).

A node drained by the bot for an incident that is closed now, drained longer than
``extra.escalation.drained_max_s``, is raised once (per node and drain) to the same place
as the incident escalations: drained nodes must not pile up until somebody reads sinfo.
The decision is ``overdue_drained`` (pure); the claim is the incidents' escalation claim,
keyed by the node and when its reason was set, so a new drain escalates again.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from bot.chat.base import ChatBackend, ChatMessage, Section
from bot.chat.text import clip, escape
from bot.core import fmt, strings
from bot.domain.slurm import DrainedNode, overdue_drained
from bot.schedule.escalation import CLAIM_TTL_S, Target
from storage import keys
from storage.claims import Claims

log = logging.getLogger(__name__)


def claim_id(node: DrainedNode) -> str:
    return f"slurm-{node.name}-{int(node.since or 0)}"


def drained_message(node: DrainedNode, now: float, mention: str) -> ChatMessage:
    text = strings.ESCALATION_DRAINED_TEXT.format(
        mention=mention, node=escape(node.name), view=node.view,
        age=fmt.duration(now - node.since) if node.since is not None else "?",
        incident=escape(node.incident or "?"), reason=escape(clip(node.reason, 200)))
    return ChatMessage(text=text, header=strings.ESCALATION_DRAINED_HEADER.format(
        node=escape(node.name)), sections=(Section(text),))


class DrainedEscalator:
    """Runs ``overdue_drained`` over the cluster's drained nodes; posts each once."""

    def __init__(self, claims: Claims, chat: ChatBackend, target: Target,
                 drained: Callable[[], list[DrainedNode]],
                 open_incidents: Callable[[], set[str]], max_age_s: float,
                 clock: Callable[[], float] = time.time) -> None:
        self.claims, self.chat, self.target = claims, chat, target
        self.drained = drained
        self.open_incidents = open_incidents
        self.max_age_s = max_age_s
        self.clock = clock

    def run(self, now: float | None = None) -> list[str]:
        """Escalate every overdue node not escalated for this drain before; their names."""
        now = self.clock() if now is None else now
        nodes = self.drained()
        if not nodes:
            return []
        done = []
        for node in overdue_drained(nodes, now, self.max_age_s, self.open_incidents()):
            if self._escalate(node, now):
                done.append(node.name)
        return done

    def _escalate(self, node: DrainedNode, now: float) -> bool:
        key = keys.escalated(claim_id(node))
        if not self.claims.claim(key, str(now), CLAIM_TTL_S):
            return False
        try:
            self.chat.post(self.target.channel, drained_message(node, now, self.target.mention))
        except Exception:
            self.claims.unclaim(key)
            log.warning("escalation of drained node %s failed; retried on the next run",
                        node.name, exc_info=True)
            return False
        log.info("escalated drained Slurm node %s to %s", node.name, self.target.channel)
        return True
