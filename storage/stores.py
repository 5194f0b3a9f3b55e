"""The one place above-storage code gets its stores: a connection opened from a URL.

``open_stores(url)`` makes the bot's two clients (text, and the bytes one RQ needs) and
``Stores`` builds each store on them, rq-style: the connection is explicit and never
leaves ``storage/``. Entry points (``bot/service.py``, the CLI commands) call it once and
hand each component the stores it uses: composition functions (``build_flow``,
``build_leader``, ``create_app``…) may take ``Stores``, components and steps take the
individual stores, never the bundle and never the client (``tests/test_architecture.py``,
``redis_takers``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import cast

from bot.domain.incident import Incident
from bot.domain.lifecycle import StepDeadlines
from bot.domain.xid import DEFAULT_POLICY, XidPolicy
from storage import keys
from storage.approvals import ApprovalStore
from storage.audit import AuditLog
from storage.chat_outbox import ChatOutboxStore
from storage.claims import Claims
from storage.connection import Redis, connect
from storage.epoch import EpochStore
from storage.events import IncidentEvents
from storage.health_history import HealthHistory
from storage.home import HomeViewers
from storage.incidents import IncidentStore
from storage.ingest import IdBlocks
from storage.jobs import JobStore
from storage.leases import Lease, scheduler_lease
from storage.paging import PageOutbox
from storage.policy_limits import PolicyLimits
from storage.renders import RenderLedger
from storage.samples import SampleStore
from storage.silences import SilenceStore
from storage.slack_budget import BudgetSettings, SlackBudget
from storage.storms import StormStore
from storage.usergroups import UsergroupCache

Clock = Callable[[], float]


class Stores:
    """Every store on one Redis server; each call builds a store on the shared clients."""

    def __init__(self, text: Redis, raw: Redis) -> None:
        self._text, self._raw = text, raw  # decode_responses=True; bytes for RQ
        # one block of incident numbers for every incident store of the process: a store
        # built later and first used after Redis lost its data would otherwise take INC-1…
        # from the emptied counter, numbers old messages still name (issue 39's chaos run)
        self._ids = IdBlocks(text)
        self._written: list[Callable[[Incident, Sequence[str]], None]] = []
        self._before_ingest: list[Callable[[], None]] = []

    def before_incident_ingest(self, hook: Callable[[], None]) -> None:
        """``hook`` runs before any incident store of this process ingests alerts (the
        data-loss watch's epoch read: one GET)."""
        self._before_ingest.append(hook)

    def _ingesting(self) -> None:
        for hook in self._before_ingest:
            hook()

    def on_incident_written(self, observer: Callable[[Incident, Sequence[str]], None]) -> None:
        """``observer`` is told every incident record any incident store of this process
        commits, right after the commit (the data-loss watch, issue 39): in memory, cheap.
        With the record, the fields it carries when it is not whole (an ingest's)."""
        self._written.append(observer)

    def _incident_written(self, record: Incident, fields: Sequence[str] = ()) -> None:
        for observer in self._written:
            observer(record, fields)

    def ping(self) -> None:
        """Raises ``StorageError`` when the server does not answer (``/readyz``)."""
        self._text.ping()

    def write_probe(self, replica: str) -> None:
        """One tiny write with a short expiry: raises ``StorageError`` when Redis answers
        PING but refuses writes (out of memory, read-only, MISCONF): ``/readyz``."""
        self._text.set(keys.write_probe(replica), "1", px=10_000)

    def aof_config(self) -> dict[str, str]:
        """The server's ``append*`` settings (``CONFIG GET``): are acks on disk."""
        return cast(dict[str, str], self._text.config_get("append*"))

    def close(self) -> None:
        self._text.close()
        self._raw.close()

    def incidents(self, *, group_wait_s: float = 30.0, clock: Clock = time.time,
                  deadlines: StepDeadlines | None = None,
                  xid_policy: XidPolicy = DEFAULT_POLICY) -> IncidentStore:
        return IncidentStore(self._text, group_wait_s=group_wait_s, clock=clock,
                             deadlines=deadlines, xid_policy=xid_policy, ids=self._ids,
                             written=self._incident_written, before_ingest=self._ingesting)

    def approvals(self) -> ApprovalStore:
        return ApprovalStore(self._text)

    def audit(self, *, clock: Clock = time.time) -> AuditLog:
        return AuditLog(self._text, clock=clock)

    def events(self) -> IncidentEvents:
        return IncidentEvents(self._text)

    def epochs(self, *, clock: Clock = time.time) -> EpochStore:
        return EpochStore(self._text, clock)

    def silences(self) -> SilenceStore:
        return SilenceStore(self._text)

    def renders(self) -> RenderLedger:
        return RenderLedger(self._text)

    def chat_outbox(self) -> ChatOutboxStore:
        return ChatOutboxStore(self._text)

    def storms(self, *, window_s: float = 60.0, threshold: int = 10,
               quiet_s: float = 300.0) -> StormStore:
        return StormStore(self._text, window_s=window_s, threshold=threshold, quiet_s=quiet_s)

    def samples(self) -> SampleStore:
        return SampleStore(self._text)

    def usergroups(self) -> UsergroupCache:
        return UsergroupCache(self._text)

    def home_viewers(self, workspace: str) -> HomeViewers:
        return HomeViewers(self._text, workspace)

    def slack_budget(self, workspace: str, settings: BudgetSettings | None = None) -> SlackBudget:
        return SlackBudget(self._text, workspace, settings)

    def page_outbox(self, *, clock: Clock = time.time) -> PageOutbox:
        return PageOutbox(self._text, clock=clock)

    def policy_limits(self, *, fleet_cap: int, fleet_window_s: float = 3600.0,
                      clock: Clock = time.time) -> PolicyLimits:
        return PolicyLimits(self._text, fleet_cap=fleet_cap, fleet_window_s=fleet_window_s,
                            clock=clock)

    def claims(self) -> Claims:
        return Claims(self._text)

    def health_history(self, *, clock: Clock = time.time) -> HealthHistory:
        return HealthHistory(self._text, clock=clock)

    def scheduler_lease(self, ttl_s: float, token: str | None = None) -> Lease:
        return scheduler_lease(self._text, ttl_s, token)

    def jobs(self) -> JobStore:
        """The extraction queue (RQ's bytes client): the jobs API, resumes, /metrics."""
        return JobStore(self._raw)


def open_stores(url: str) -> Stores:
    """The stores of the Redis at ``url`` (short socket timeouts: an outage is an error)."""
    return Stores(connect(url), connect(url, decode=False))
