"""Prometheus metrics for the whole bot, defined once (import these, never redefine).

One private ``CollectorRegistry`` rather than the process-global one: importing this
module twice (tests, reloads) never raises "duplicated timeseries", and ``/metrics``
shows only what the bot means to export (plus process stats).

Values that live in Redis (incidents by state, queue depth) are pulled at scrape time by
hooks added with ``add_scrape_hook``; counters are pushed where events happen.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Mapping

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    PlatformCollector,
    ProcessCollector,
    generate_latest,
)

log = logging.getLogger(__name__)

REGISTRY = CollectorRegistry(auto_describe=True)
ProcessCollector(registry=REGISTRY)
PlatformCollector(registry=REGISTRY)

NS = "incident_bot"


def _counter(name: str, labels: tuple[str, ...], doc: str) -> Counter:
    """Every metric in the one registry and namespace."""
    return Counter(name, doc, labels, namespace=NS, registry=REGISTRY)


def _gauge(name: str, labels: tuple[str, ...], doc: str) -> Gauge:
    return Gauge(name, doc, labels, namespace=NS, registry=REGISTRY)


# --- alerts and incidents ---------------------------------------------------------------
ALERTS_RECEIVED = _counter("alerts_received", ("source",),
                           "Alerts accepted, by source (alertmanager|webhook|agent).")
ALERTS_DEDUPLICATED = _counter("alerts_deduplicated", ("source",),
                               "Alerts dropped or merged as duplicates, by source.")
ALERTS_REJECTED = _counter("alerts_rejected", ("reason",),
                           "Alert requests refused (auth, size, schema), by reason.")
INCIDENTS_BY_STATE = _gauge("incidents", ("state",), "Incidents currently in each state.")
INGEST_WRITE = Histogram(
    "ingest_write_duration_seconds",
    "Wall time of one store write of alerts (a group commit's, or one request's): "
    "read, plan and the fsynced EXEC. Its sum over time is how busy the writer is.",
    namespace=NS, registry=REGISTRY,
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5))

# --- diagnosis, SSH, actions ------------------------------------------------------------
DIAGNOSIS_DURATION = Histogram(
    "diagnosis_duration_seconds", "Wall time of one playbook run, by playbook and status.",
    ["playbook", "status"], namespace=NS, registry=REGISTRY,
    buckets=(0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 40.0, 80.0))
SSH_ERRORS = _counter("ssh_errors", ("kind",),
                      "SSH transport failures, by kind (unreachable|host_key|auth|timeout|ssh).")
ACTIONS = _counter("actions", ("kind", "result"),
                   "Remediation actions, by action kind and result (verified|failed|...).")
APPROVALS = _counter("approvals", ("outcome",),
                     "Approval decisions, by outcome (approved|denied|expired|refused).")

# --- chat -------------------------------------------------------------------------------
SLACK_API_ERRORS = _counter("slack_api_errors", ("method", "error"),
                            "Slack Web API calls that failed, by method and error code.")
SLACK_API_RETRIES = _counter("slack_api_retries", ("method",),
                             "Slack Web API calls retried (rate limits, 5xx), by method.")

# --- extraction jobs --------------------------------------------------------------------
QUEUE_DEPTH = _gauge("queue_depth", ("queue",), "Jobs waiting in an RQ queue.")
JOB_PROGRESS = _gauge("job_progress_ratio", ("job", "host"),
                      "Fraction of samples done (0..1) per extraction job.")
JOB_RATE = _gauge("job_rate_samples_per_second", ("job", "host"), "Recent rate per extraction job.")

# --- scheduler, digests, escalation -----------------------------------------------------
SCHEDULER_LEADER = _gauge("scheduler_leader", (), "1 while this replica holds the scheduler lease.")
SCHEDULER_FIRINGS = _counter("scheduler_firings", ("job", "outcome"),
                             "Scheduled job slots, by job and outcome (ran|duplicate|error).")
DIGESTS_POSTED = _counter("digests_posted", ("channel",), "Health digests posted, by channel.")
ESCALATIONS = _counter("escalations", ("target",),
                       "Critical incidents escalated, by target (channel|usergroup).")
SAMPLES_STORED = _counter("samples_stored", ("host",), "Host samples written for digests, by host.")

# --- HTTP -------------------------------------------------------------------------------
HTTP_REQUESTS = _counter("http_requests", ("route", "status"),
                         "HTTP requests answered, by route and status code.")

_SCRAPE_HOOKS: list[Callable[[], None]] = []


def add_scrape_hook(hook: Callable[[], None]) -> None:
    """Run ``hook`` before each scrape (refresh gauges that mirror Redis)."""
    _SCRAPE_HOOKS.append(hook)


def clear_scrape_hooks() -> None:
    _SCRAPE_HOOKS.clear()


_STATES_SEEN: set[str] = set()


def set_incident_counts(counts: Mapping[str, int]) -> None:
    """Set the per-state gauge for each state given (the caller passes every state, zeros
    included; a state once seen and now absent is reset to 0 rather than left stale)."""
    _STATES_SEEN.update(counts)
    for state in _STATES_SEEN:
        INCIDENTS_BY_STATE.labels(state=state).set(counts.get(state, 0))


def set_job_progress(job: str, host: str, done: int, total: int, rate: float | None = None) -> None:
    JOB_PROGRESS.labels(job=job, host=host).set(done / total if total > 0 else 0.0)
    if rate is not None:
        JOB_RATE.labels(job=job, host=host).set(rate)


def forget_job(job: str, host: str) -> None:
    """Drop a finished job's series so label cardinality stays bounded."""
    for gauge in (JOB_PROGRESS, JOB_RATE):
        with contextlib.suppress(KeyError):
            gauge.remove(job, host)


def render() -> tuple[bytes, str]:
    """Body and content type for ``/metrics``; a failing hook never fails the scrape."""
    for hook in list(_SCRAPE_HOOKS):
        try:
            hook()
        except Exception:  # stale gauges beat a failed scrape
            log.warning("metrics scrape hook %r failed", hook, exc_info=True)
    return generate_latest(REGISTRY), CONTENT_TYPE_LATEST


# --- the chat outbox (issue 24) ------------------------------------------------------------
CHAT_OUTBOX = _counter("chat_outbox_items", ("outcome",),
                       "Chat outbox items by outcome: delivered, delivered_late, deferred, "
                       "given_up.")

# --- the ground under the bot (issue 39) -------------------------------------------------
REDIS_REFUSALS = _counter("redis_refusals", ("reason", "where"),
                          "Redis commands refused (oom, readonly, loading, misconf, maxclients, "
                          "timeout, connection, busy, contention…), by reason and where "
                          "(ingest, slack, readyz, consumer, outbox, reconciler, home).")
REDIS_ACCEPTING = _gauge("redis_accepting_writes", (),
                         "1 when /readyz's last write probe was taken, 0 when it was refused.")
LOOP_PROGRESS_AGE = _gauge("loop_progress_age_seconds", ("loop",),
                           "Seconds since each background loop (consumer, outbox, reconciler) "
                           "last made progress; /readyz is 503 past its grace.")
DATA_LOSSES = _counter("data_losses", ("kind",),
                       "Times this replica found Redis had lost its data: wiped (the epoch "
                       "gone or new) or rolled_back (the incident counter went back).")
SLACK_REPLAYS = _counter("slack_replays", ("kind",),
                         "Signed Slack requests refused as replays, by payload kind.")


def refused(reason: str, where: str) -> None:
    """Count one Redis refusal (``storage.connection.refusal``'s reason) at ``where``."""
    REDIS_REFUSALS.labels(reason=reason, where=where).inc()


def set_loop_ages(ages: Mapping[str, float]) -> None:
    for name, age in ages.items():
        LOOP_PROGRESS_AGE.labels(loop=name).set(round(age, 3))
