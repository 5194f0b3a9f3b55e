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

# --- alerts and incidents ---------------------------------------------------------------
ALERTS_RECEIVED = Counter(
    "alerts_received", "Alerts accepted, by source (alertmanager|webhook|agent).",
    ["source"], namespace=NS, registry=REGISTRY)
ALERTS_DEDUPLICATED = Counter(
    "alerts_deduplicated", "Alerts dropped or merged as duplicates, by source.",
    ["source"], namespace=NS, registry=REGISTRY)
ALERTS_REJECTED = Counter(
    "alerts_rejected", "Alert requests refused (auth, size, schema), by reason.",
    ["reason"], namespace=NS, registry=REGISTRY)
INCIDENTS_BY_STATE = Gauge(
    "incidents", "Incidents currently in each state.", ["state"], namespace=NS, registry=REGISTRY)

# --- diagnosis, SSH, actions ------------------------------------------------------------
DIAGNOSIS_DURATION = Histogram(
    "diagnosis_duration_seconds", "Wall time of one playbook run, by playbook and status.",
    ["playbook", "status"], namespace=NS, registry=REGISTRY,
    buckets=(0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 40.0, 80.0))
SSH_ERRORS = Counter(
    "ssh_errors", "SSH transport failures, by kind (unreachable|host_key|auth|timeout|ssh).",
    ["kind"], namespace=NS, registry=REGISTRY)
ACTIONS = Counter(
    "actions", "Remediation actions, by action kind and result (verified|failed|...).",
    ["kind", "result"], namespace=NS, registry=REGISTRY)
APPROVALS = Counter(
    "approvals", "Approval decisions, by outcome (approved|denied|expired|refused).",
    ["outcome"], namespace=NS, registry=REGISTRY)

# --- chat -------------------------------------------------------------------------------
SLACK_API_ERRORS = Counter(
    "slack_api_errors", "Slack Web API calls that failed, by method and error code.",
    ["method", "error"], namespace=NS, registry=REGISTRY)
SLACK_API_RETRIES = Counter(
    "slack_api_retries", "Slack Web API calls retried (rate limits, 5xx), by method.",
    ["method"], namespace=NS, registry=REGISTRY)

# --- extraction jobs --------------------------------------------------------------------
QUEUE_DEPTH = Gauge(
    "queue_depth", "Jobs waiting in an RQ queue.", ["queue"], namespace=NS, registry=REGISTRY)
JOB_PROGRESS = Gauge(
    "job_progress_ratio", "Fraction of samples done (0..1) per extraction job.",
    ["job", "host"], namespace=NS, registry=REGISTRY)
JOB_RATE = Gauge(
    "job_rate_samples_per_second", "Recent rate per extraction job.",
    ["job", "host"], namespace=NS, registry=REGISTRY)

# --- scheduler, digests, escalation -----------------------------------------------------
SCHEDULER_LEADER = Gauge(
    "scheduler_leader", "1 while this replica holds the scheduler lease.",
    namespace=NS, registry=REGISTRY)
SCHEDULER_FIRINGS = Counter(
    "scheduler_firings", "Scheduled job slots, by job and outcome (ran|duplicate|error).",
    ["job", "outcome"], namespace=NS, registry=REGISTRY)
DIGESTS_POSTED = Counter(
    "digests_posted", "Health digests posted, by channel.", ["channel"],
    namespace=NS, registry=REGISTRY)
ESCALATIONS = Counter(
    "escalations", "Critical incidents escalated, by target (channel|usergroup).",
    ["target"], namespace=NS, registry=REGISTRY)
SAMPLES_STORED = Counter(
    "samples_stored", "Host samples written for digests, by host.", ["host"],
    namespace=NS, registry=REGISTRY)

# --- HTTP -------------------------------------------------------------------------------
HTTP_REQUESTS = Counter(
    "http_requests", "HTTP requests answered, by route and status code.",
    ["route", "status"], namespace=NS, registry=REGISTRY)

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
