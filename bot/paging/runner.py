"""Paging assembled from settings, and the loop a thread runs: what ``bot/service.py``
calls (two lines: build at start, a thread in ``start_background``).

No ``paging.pagerduty`` section: no paging. A section whose routing key is not in the
environment stops the start with the key and the reason, like any bad setting.
"""

from __future__ import annotations

import threading

from bot.config.settings import Settings
from bot.core.errors import ConfigError, log_internal
from bot.paging.client import EventsV2Client
from bot.paging.service import PagingService, PagingStores
from storage.stores import Stores

TICK_S = 2.0  # how often a replica looks at the events, the open incidents and the outbox


def build_paging(settings: Settings, stores: Stores) -> PagingService | None:
    pd = settings.paging.pagerduty
    if pd is None:
        return None
    key = pd.routing_key()
    if key is None:
        raise ConfigError(f"key 'paging.pagerduty.routing_key_env': environment variable "
                          f"{pd.routing_key_env} is not set (the Events v2 integration key)")
    return PagingService(PagingStores.of(stores), pd.policy(),
                         EventsV2Client(pd.url, key, pd.timeout_s))


def run_forever(paging: PagingService, stop: threading.Event, every_s: float = TICK_S) -> None:
    """Tick until ``stop``; a Redis blip or a bug in one tick is logged, never fatal."""
    while not stop.is_set():
        try:
            paging.tick()
        except Exception as exc:
            log_internal(exc, "paging tick")
        stop.wait(every_s)
