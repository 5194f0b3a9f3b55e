"""Every Redis key the bot uses, built in one place (like rq's ``Job.key_for``).

All keys live under one prefix so a shared Redis can host several deployments.
Add new keys here, never as string literals elsewhere.
"""

from __future__ import annotations

PREFIX = "ib"


def _k(*parts: object) -> str:
    return ":".join([PREFIX, *(str(p) for p in parts)])


# incidents
def incident(incident_id: str) -> str:
    return _k("incident", incident_id)


def incident_seq() -> str:
    return _k("incident", "seq")


def incidents_open() -> str:
    """Set of open incident ids."""
    return _k("incidents", "open")


def incidents_all() -> str:
    """Sorted set of incident ids by creation time."""
    return _k("incidents", "all")


def incident_by_host_kind(host: str, kind: str) -> str:
    """The open incident for (host, kind): one at a time."""
    return _k("incident", "open", host, kind)


def group(kind: str) -> str:
    """The open parent incident grouping hosts of one kind within group_wait."""
    return _k("group", kind)


def silence(host: str, kind: str) -> str:
    return _k("silence", host, kind)


def silences() -> str:
    return _k("silences")


# audit
def audit(incident_id: str) -> str:
    """Per-incident audit stream."""
    return _k("audit", incident_id)


def audit_all() -> str:
    return _k("audit", "all")


# approvals
def approval(approval_id: str) -> str:
    return _k("approval", approval_id)


def approvals_pending() -> str:
    return _k("approvals", "pending")


def approvals_of_incident(incident_id: str) -> str:
    """Set of approval ids created for one incident (to expire or list them together)."""
    return _k("approvals", "incident", incident_id)


def approvals_resolver(incident_id: str) -> str:
    """Who resolved the incident ("resolver<TAB>who<TAB>at", issue 25): a click on one of
    its approvals created after the resolve (a diagnosis that finished late) withdraws it."""
    return _k("approvals", "resolved", incident_id)


# chat
def chat_update_gate(channel: str, ts: str) -> str:
    return _k("chat", "update", channel, ts)


# extraction
def job_events(job_id: str) -> str:
    return _k("job", job_id, "events")


def job_control(job_id: str) -> str:
    """pause/cancel requests read by the running job."""
    return _k("job", job_id, "control")


def jobs_by_host(host: str) -> str:
    return _k("jobs", "host", host)


def jobs_all() -> str:
    return _k("jobs")


def job_incident(job_id: str) -> str:
    return _k("job", job_id, "incident")


def queue_name(host: str) -> str:
    """RQ queue for one host's workers (RQ adds its own ``rq:queue:`` prefix)."""
    return f"{PREFIX}-extract-{host}"


def job_record(job_id: str) -> str:
    """Hash: one extraction job across all its RQ runs (spec, state, progress)."""
    return _k("job", job_id)


def job_failures(job_id: str) -> str:
    """Hash: sample id -> tries and last error, so a bad sample is skipped after N tries."""
    return _k("job", job_id, "failures")


def job_lease(job_id: str) -> str:
    """Who is running the job now; a retry waits until the previous run's lease is gone."""
    return _k("job", job_id, "lease")


# scheduler
def scheduler_lease() -> str:
    return _k("scheduler", "lease")


def firing(job: str, slot: str) -> str:
    """SET NX guard so a handover never fires one slot twice."""
    return _k("firing", job, slot)


def samples(host: str, metric: str) -> str:
    """Time series of host samples (GPU memory/util, disk) for digests."""
    return _k("samples", host, metric)


def escalated(incident_id: str) -> str:
    return _k("escalated", incident_id)


def sample_hosts() -> str:
    """Set of hosts that have stored samples (digest discovery)."""
    return _k("sampleidx", "hosts")


def sample_metrics(host: str) -> str:
    """Set of metric names stored for one host."""
    return _k("sampleidx", "metrics", host)


# --- alerts in, incidents out (ingest) --------------------------------------------------
def alert_seen(identity: str) -> str:
    """Dedup marker for one alert delivery (a digest of fingerprint, status and start).

    Written in the same transaction as the incident change it caused, so "seen" always
    means "applied": a retried or HA-duplicated delivery is answered without effect.
    """
    return _k("alert", "seen", identity)


def alert_incident(fingerprint: str) -> str:
    """Which incident an active alert fingerprint folded into (resolve by fingerprint)."""
    return _k("alert", "inc", fingerprint)


def incident_children(parent_id: str) -> str:
    """Set of child incident ids grouped under a parent."""
    return _k("incident", parent_id, "children")


def incident_events() -> str:
    """Stream of incident.opened|folded|grouped|resolved|alert_cleared for the flow."""
    return _k("events", "incidents")


# --- the incident message's renders (approvals) -------------------------------------------
def render_seq(incident_id: str) -> str:
    """Counter: the sequence number of the newest render of an incident's message."""
    return _k("render", incident_id, "seq")


def render_applied(incident_id: str) -> str:
    """The sequence number of the render last sent to chat (older ones are dropped)."""
    return _k("render", incident_id, "applied")


def render_lock(incident_id: str) -> str:
    """Held while one replica compares and sends a render of the incident's message."""
    return _k("render", incident_id, "lock")

# Slack rate budget shared by every replica (issue 15)
def slack_tier_budget(workspace: str, tier: str) -> str:
    """GCRA theoretical arrival time (ms) for one workspace's method tier."""
    return _k("slack", "budget", workspace, tier)


def slack_post_budget(workspace: str, channel: str) -> str:
    """GCRA state for ``chat.postMessage`` in one channel (about 1 per second)."""
    return _k("slack", "post", workspace, channel)


def home_viewers(workspace: str) -> str:
    """Sorted set: user id → when they last opened the App Home (refresh on change)."""
    return _k("slack", "home", workspace, "viewers")


def home_shown(workspace: str) -> str:
    """Hash: user id → hash of the Home view last published to them."""
    return _k("slack", "home", workspace, "shown")


# paging (issue 27): the PagerDuty outbox
def page_queue(incident_id: str) -> str:
    """List: the incident's unsent Events v2 items, oldest first (sent head first)."""
    return _k("page", "queue", incident_id)


def page_ready() -> str:
    """Sorted set: incident id -> when its head item may be sent next."""
    return _k("page", "ready")


def page_state() -> str:
    """Hash: incident id -> the last action queued (trigger, acknowledge, resolve) or acked."""
    return _k("page", "state")


def page_dead() -> str:
    """List: items PagerDuty refused as invalid (400), kept with the reason."""
    return _k("page", "dead")


def page_lease(incident_id: str) -> str:
    """Who is sending the incident's head item now."""
    return _k("page", "lease", incident_id)

# fleet policy (issue 28)
def policy_hosts(policy: str) -> str:
    """Sorted set: host → when it was first acted on automatically under ``policy``."""
    return _k("policy", "hosts", policy)


def policy_fleet_hosts() -> str:
    """Sorted set: host → when it was acted on automatically under any policy (the breaker)."""
    return _k("policy", "fleet")


def policy_breaker() -> str:
    """Until when (ms) the fleet breaker is open; expires with it."""
    return _k("policy", "breaker")


def maintenance() -> str:
    """JSON list of the recurring maintenance windows (``bot/domain/maintenance.py``)."""
    return _k("maintenance")


def usergroup_members(group: str) -> str:
    """JSON list of a Slack usergroup's members, shared by replicas for a short TTL."""
    return _k("slack", "usergroup", group)

# --- work in progress: owners and deadlines of transient states (issue 24) ---------------
def incidents_inflight() -> str:
    """Sorted set: incident id → when its owner's deadline passes (transient states only)."""
    return _k("incidents", "inflight")


def incident_owner(incident_id: str) -> str:
    """Hash: the transient state's owner token, deadline and re-drive attempts."""
    return _k("incident", incident_id, "owner")


def reconcile_sweep() -> str:
    """``SET NX`` claim: one replica sweeps the in-flight set per period."""
    return _k("reconcile", "sweep")

# --- the chat outbox (issue 24) ---------------------------------------------------------
def outbox_queue(incident_id: str) -> str:
    """Sorted set: the incident's undelivered chat items by sequence number (head first)."""
    return _k("outbox", incident_id, "queue")


def outbox_items(incident_id: str) -> str:
    """Hash: sequence number → one chat item (JSON: op, purpose, message, target, due …)."""
    return _k("outbox", incident_id, "items")


def outbox_seq(incident_id: str) -> str:
    """Counter: the sequence number of the incident's newest chat item."""
    return _k("outbox", incident_id, "seq")


def outbox_posted(incident_id: str) -> str:
    """Hash: purpose ("incident-card", "evidence" …) → where it was posted (JSON)."""
    return _k("outbox", incident_id, "posted")


def outbox_newest(incident_id: str) -> str:
    """Hash: purpose → "version:seq" of its newest item (older edits of it are moot)."""
    return _k("outbox", incident_id, "newest")


def outbox_untold() -> str:
    """Set: "incident\tpurpose\tseq" of each delivery whose place the flow has not been
    told yet (added in the ack's own script, removed once told): a sender killed between
    the two leaves it for any replica's next look, not lost with its memory."""
    return _k("outbox", "untold")


def outbox_due() -> str:
    """Sorted set: incident id → when its head chat item is due (or its claim expires)."""
    return _k("outbox", "due")


def outbox_due_top() -> str:
    """Sorted set: the part of ``outbox_due`` whose head is a top-level post (an incident's
    first message): sent before thread replies when Slack's pace is the limit (issue 29)."""
    return _k("outbox", "due", "top")


# the ground under the bot (issue 39)
def epoch() -> str:
    """String: this Redis's data epoch (JSON: a random id and when it began), written once
    when the bot first finds the data empty; gone or different means the data was lost."""
    return _k("epoch")


def data_loss(epoch_id: str) -> str:
    """Claim: the one replica that announces the loss of epoch ``epoch_id``."""
    return _k("epoch", "lost", epoch_id)


def data_loss_shown(epoch_id: str) -> str:
    """Set: the incidents whose card some replica delivered shortly before the loss of
    ``epoch_id`` (each replica's memory, pooled: none of them is named as never shown)."""
    return _k("epoch", "lost", epoch_id, "shown")


def data_loss_told(epoch_id: str) -> str:
    """Set: the incidents some replica has named in chat for the loss of ``epoch_id``."""
    return _k("epoch", "lost", epoch_id, "told")


def write_probe(replica: str) -> str:
    """String with a short expiry: ``/readyz``'s proof that Redis takes a write now."""
    return _k("readyz", replica)


def slack_request(timestamp: str, signature: str) -> str:
    """Claim: one signed Slack request (its timestamp and signature) seen, for the window
    in which its signature is valid: the same request again is a replay."""
    return _k("slack", "seen", timestamp, signature.removeprefix("v0="))

# health history per node (issue 36: repeat offenders, the smoke baseline)
def health_faults(host: str) -> str:
    """Sorted set of ``FaultSeen`` JSON by time: the hardware faults each diagnosis saw."""
    return _k("health", host, "faults")


def health_gates(host: str) -> str:
    """Sorted set of ``GatePass`` JSON by time: the gates that passed on this node."""
    return _k("health", host, "gates")


def health_smoke(host: str) -> str:
    """Hash: GPU key (UUID) -> its last good smoke figures (JSON)."""
    return _k("health", host, "smoke")


def health_rma() -> str:
    """Hash: host -> the ``RepeatOffence`` that sent it to RMA (JSON)."""
    return _k("health", "rma")


# --- storms: a burst of incidents in one channel as one growing message (issue 37) --------
def storm_arrivals(channel: str) -> str:
    """Sorted set: incident id → when its first message was due in ``channel`` (the last
    minute's arrivals, trimmed as they age): the rate that starts a storm."""
    return _k("storm", "arrivals", channel)


def storm_active(channel: str, kind: str) -> str:
    """The id of the storm now collecting ``kind``'s new incidents in ``channel``; expires
    after a quiet spell (no new member), so the next incident gets its own message."""
    return _k("storm", "active", channel, kind)


def storm_seq() -> str:
    """Counter: the number of the newest storm (its id is ``storm-N``)."""
    return _k("storm", "seq")


def storm(storm_id: str) -> str:
    """Hash: one storm (id, channel, kind, started)."""
    return _k("storm", storm_id)


def storm_members(storm_id: str) -> str:
    """Sorted set: incident id → when it joined the storm."""
    return _k("storm", storm_id, "members")


def storm_placed() -> str:
    """Hash: incident id → the storm it joined, or ``-`` (its own message): one decision
    per incident, taken when its first message is due and kept."""
    return _k("storm", "placed")
