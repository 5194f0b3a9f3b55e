"""Operator-facing strings: general, digests, chat and approvals, extraction, remediation, alerts."""

from __future__ import annotations

# --- general ---------------------------------------------------------------------------
NOT_BUILT = "{what} is not built yet in this version of incident-bot"
INTERNAL_ERROR = "Something went wrong on our side (error id {error_id}). Please quote it when reporting."

# --- digest, escalation, scheduler (issue 8) ---------------------------------------------
DIGEST_HEADER = "Health digest · {period}"
DIGEST_FALLBACK = ("Health digest {period}: {hosts} hosts, {idle} of VRAM held idle, "
                   "{opened} incidents opened, {resolved} resolved")
DIGEST_SUMMARY = "*Fleet* · {hosts} hosts · {gpus} GPUs · VRAM held idle: *{idle}*"
DIGEST_INCIDENTS = "Incidents: {opened} opened · {resolved} resolved · {open} still open"
DIGEST_TTR = "Time to resolve: median {median} · worst {max}"
DIGEST_ACTIONS = "Actions: {summary}"
DIGEST_NO_ACTIONS = "Actions: none"
DIGEST_HOST = "*{host}* · {gpus} GPUs{badge}"
DIGEST_WASTE_BADGE = " · :red_circle: VRAM held idle {idle}"
DIGEST_GPU_MEM = "GPU memory min/avg/max: {min} / {avg} / {max}"
DIGEST_GPU_UTIL = "GPU utilisation min/avg/max: {min} / {avg} / {max}"
DIGEST_NO_GPU = "No GPU samples in this period"
DIGEST_DISK = "Disk {mount}: {pct} used ({used} of {size}) · {growth}/day · {eta}"
DIGEST_DISK_FULL_IN = "full in {days}"
DIGEST_DISK_NOT_FILLING = "not filling"
DIGEST_JOBS_TITLE = "Jobs"
DIGEST_NO_HOSTS = "No host samples were stored in this period (is the sampler or agent running?)"
DIGEST_CONTEXT = "{start} → {end} · hosts ordered by what they need of a person, then VRAM held idle"
DIGEST_CHART_TITLE = "GPU memory vs utilisation and disk fill, {period}"
DIGEST_CHART_WRITTEN = "chart: {path}"
DIGEST_NOTHING_CONFIGURED = ("no digest channel configured: set slack.channel or "
                             "extra.digest.schedules[].channel")
ESCALATION_TEXT = ("{mention}:rotating_light: Critical incident {id} on {host} ({kind}) has had no "
                   "response for {age}")
ESCALATION_HEADER = "Escalated: {kind} on {host}"
ESCALATION_DETAIL = "State: {state} · opened {age} ago · nobody approved, denied or acknowledged it"
ESCALATION_LINK = "Original message: {link}"

# --- chat and approvals (bot/chat, bot/domain/approval.py, bot/chat/slash.py) ----------------------
APPROVAL_REFUSED = "You are not allowed to approve or deny this ({kind}). Approvers: {who}. This attempt was recorded."
APPROVAL_REFUSED_SELF = "You triggered this action, and this workspace does not allow approving your own request."
APPROVAL_EXPIRED = "This approval expired at {when} UTC; nothing was run. Ask for a fresh diagnosis."
APPROVAL_ALREADY_DONE = "Already {status} by {who}; nothing more to do."
APPROVAL_WAS_DENIED = "This action was denied by {who}: {reason}"
APPROVAL_NOT_FOUND = "This button no longer matches a pending approval (unknown or removed)."
APPROVAL_NEED_SECOND = "Recorded your approval; this action needs a second approver ({have}/{need})."
APPROVAL_SAME_PERSON = "You already approved this; a different person must give the second approval."
APPROVAL_GRANTED = "Approved by {who}; running now: {kind}."
APPROVAL_DENIED_OK = "Denied: {kind}. Reason recorded: {reason}"
APPROVAL_FAILED = "The approval was recorded but starting the action failed (error id {error_id})."
APPROVAL_MARK_APPROVED = ":white_check_mark: Approved by {who}"
APPROVAL_MARK_DENIED = ":no_entry: Denied by {who}: {reason}"
APPROVAL_MARK_EXPIRED = ":hourglass: Expired at {when} UTC; not run"
APPROVAL_MARK_WAITING = ":hourglass_flowing_sand: Approved by {who}; waiting for a second approver"
DENY_MODAL_TITLE = "Deny action"
DENY_MODAL_LABEL = "Why deny it? (recorded in the audit trail)"
DENY_MODAL_SUBMIT = "Deny"
DENY_REASON_REQUIRED = "Please give a reason (at least 3 characters)."
NO_APPROVERS = "nobody (no approvers configured)"
CHAT_TRUNCATED = "… {blocks} not shown; see the thread."
CONFIRM_TITLE = "Run this on {host}?"
CONFIRM_YES = "Run it"
CONFIRM_NO = "Cancel"
SLASH_WORKING = "Working on it…"
SLASH_UNAVAILABLE = "`{name}` is not available in this deployment."
SLASH_USAGE = (
    "Usage: {cmd} help | status | incidents | diag HOST [PLAYBOOK] | jobs | job ID"
    " | silence HOST KIND DURATION (e.g. 30m, 2h) | digest now"
    " | ack ID | resolve ID | snooze ID [DURATION] | evidence ID | drained | stats [7d]"
)
SLASH_HELP = (
    "*{cmd} help* this text\n*{cmd} status [HOST]* each host (or one): GPU memory and utilization, "
    "disks, open incidents\n"
    "*{cmd} incidents* open incidents\n*{cmd} diag HOST [PLAYBOOK]* run a diagnosis now (the "
    "playbook the host's state calls for, unless named)\n"
    "*{cmd} jobs* extraction jobs · *{cmd} job ID* one job\n"
    "*{cmd} silence HOST KIND DURATION* mute alerts of one kind on a host (e.g. 2h)\n"
    "*{cmd} digest now* post the health digest\n"
    "*{cmd} ack ID* · *{cmd} resolve ID* · *{cmd} snooze ID [30m|2h|1d]* decide on an incident\n"
    "*{cmd} evidence ID* post the raw probe output in the incident's thread\n"
    "*{cmd} drained* Slurm nodes drained or draining: reason, who, how long\n"
    "*{cmd} stats [7d]* time to acknowledge and to recover (a verified fix that held), per kind "
    "and host, and the share fixed with one click, over a period"
)
STATUS_GPUS = "{which}: {used} of {total} used, {util} busy"
STATUS_GPU_ONE = "GPU {indexes}"
STATUS_GPU_MANY = "GPUs {indexes}"
STATUS_GPUS_UNREAD = "GPUs: could not read them: {quote}"
STATUS_NO_GPUS = "GPUs: none seen"
STATUS_DISKS = "disks: {disks}"
STATUS_DISK = "{mount} {pct:.0f}% full: {avail} free of {size}"
STATUS_NO_DISKS = "none read"
STATUS_INCIDENTS = "incidents: {incidents}"
STATUS_NO_INCIDENTS = "none open"
STATUS_UNREACHABLE = "unreachable: {why}"
STATUS_NO_HOSTS = "No hosts in the inventory."
STATUS_UNKNOWN_HOST = "`{host}` is not in the inventory."
TERMINAL_USAGE = (
    'Commands: approve N | deny N "reason" | revert N | ack ID | snooze ID [30m|2h|1d]'
    ' | resolve ID | retry ID | escalate ID | help | quit'
)
TERMINAL_UNKNOWN_NUMBER = "No button numbered {n} (known: {known})."
TERMINAL_NO_VERB = "Item {n} has no `{verb}` button (it has: {verbs})."
TERMINAL_ONLY_YOU = "(only {user} sees this)"
CHAT_DELIVERY_FAILED = "{method} failed after {attempts} attempt(s): {error}"

# --- extraction jobs and workers (bot/extract, issue 7) ---------------------------------
EXTRACT_RESUMED = "resumed at {done}/{total}"
EXTRACT_STARTED = "started at 0/{total}"
EXTRACT_PARTIAL_REMOVED = "{n} partial file{s} removed"
EXTRACT_CORRUPT_RECOMPUTED = "{n} corrupt file{s} recomputed"
EXTRACT_SUMMARY = "{name}: {state} {done}/{total} in {duration} · {repairs} · {bytes} written"
EXTRACT_SUMMARY_SKIPPED = " · {n} sample{s} skipped after repeated failures"
EXTRACT_NO_REPAIRS = "no files repaired"
EXTRACT_DISK_FULL = "disk full while writing {path}: job paused (free space, then resume it)"
EXTRACT_DISK_FULL_ALERT = "Extraction {job} on {host} paused: disk full under {path}"
EXTRACT_SAMPLE_SKIPPED = "sample {id} skipped after {tries} tries: {error}"
EXTRACT_NO_SUCH_JOB = "no such job {job}"
EXTRACT_CANNOT_RESUME = "job {job} is {state}; only paused, interrupted or failed jobs can be resumed"
EXTRACT_CANNOT_CONTROL = "job {job} is already {state}"
EXTRACT_NO_JOBS = "no extraction jobs"
EXTRACT_SUBMITTED = "submitted {job} ({total} samples) to queue {queue}"
EXTRACT_PAUSE_REQUESTED = "pause requested for {job} (it stops after the batch in flight)"
EXTRACT_CANCEL_REQUESTED = "cancel requested for {job}"
EXTRACT_RESUME_QUEUED = "{job} queued again as run {run}"
EXTRACT_NO_REDIS = "cannot reach Redis at {url}: {error}"
EXTRACT_PARENT_GONE = "worker process is gone; exiting so the retry never runs next to an orphan"

# --- remediation (bot/remediation, `incident-bot act`, issue 6) ---------------------------
REM_GPUS_FREE = "{free}/{total} GPUs free (max {max} MiB)"
# issue 35: a stop is judged on what its subject held; other holders are said, not blamed
REM_GPUS_FREE_OF_IT = "{free}/{total} GPUs free of it"
REM_OTHERS_STILL = "still holding GPUs, not this action's to free: {who}"
REM_OTHER_HOLDER = "PID {pid}{unit} on GPU {gpus}, {gib} GiB"
REM_STATE_OK = "state confirmed"
REM_RESPAWN_UNIT = "{unit} came back: PID {pid} (was {was}) runs under it again"
REM_UNIT_NOW = "{unit} is {active}, unit file {file}"
REM_PROC_ALIVE = "PID {pid} is still running"
REM_HOLDER = "PID {pid} ({unit}) on GPU {gpus}"
REM_HELD_BY = "still held by {who}"
REM_HELD = "GPU {gpus} still held (the driver does not show by whom)"
REM_JOURNAL = "journal {before} → {after} (limit {limit})"
REM_SUCCEEDED = "{title} {subject}; {detail} after {secs:.1f} s"
REM_NOOP = "{subject}: nothing to do ({why}); {detail}"
REM_RESPAWNED = "{title} {subject}, but {detail}"
REM_STILL_HELD = "{title} {subject}, but {detail}"
REM_TIMED_OUT_BUT_DONE = "`{command}` hit its {deadline:g} s deadline, yet the re-probe shows it worked: {rest}"
REM_TIMED_OUT = "`{command}` hit its {deadline:g} s deadline and did not take effect: {detail}"
REM_FAILED_STEP = "`{command}` failed (exit {status}): {why}; {detail}"
REM_FAILED_VERIFY = "ran {commands} on {host}, but the effect did not show: {detail}"
REM_DRY_RUN = "dry run: would run {n} command(s) on {host}; nothing was run"
REM_UNREACHABLE = "could not reach {host}: {why}; nothing was run"
REM_LOST_MIDWAY = ("{host} stopped answering during the action ({why}); sent before it did, "
                   "with no answer: {sent}")
REM_CAPTURE_FAILED = "could not read the state of {subject} on {host} before acting ({why}); nothing was run"
REM_UNIT_MISSING = "{unit} does not exist on {host}; nothing was run"
REM_RESUMED = "resumed extraction job {job}: {state}, {done}/{total} done"
REM_RESUME_NO_REDIS = "extraction.resume needs the bot's Redis (set redis_url or REDIS_URL)"
REM_NO_AUDIT = "cannot act without an audit trail: Redis at {url} is unreachable ({why})"
REM_CONFIRM = "Run {n} command(s) on {host} as {actor}?"
REM_PLAN_HEADER = "{kind} on {host} ({address}) · risk: {risk}"
REM_GPUS_HELD = "{held}/{total} GPUs hold memory (max {max} MiB)"
# issue 35: a verification that could not read the host is no verdict on the effect
REM_COULD_NOT_READ = "could not read the host back: {why}"
REM_COULD_NOT_CHECK = "{title} {subject} was sent, but {host} could not be read back ({why}): nothing shows it worked"
REM_LOST_MID_ACTION = "lost {host} after {ran} ({why}): nothing shows what the rest did"

# --- alerts in, incidents out (issue 4) --------------------------------------------------
ALERT_UNAUTHORIZED = ("missing or invalid bearer token "
                      "(Authorization: Bearer <INCIDENT_BOT_ALERT_TOKEN>)")
ALERT_NO_TOKEN_CONFIGURED = ("alert webhooks are disabled: "
                             "INCIDENT_BOT_ALERT_TOKEN is not set on the server")
ALERT_TOO_LARGE = "request body over the {limit}-byte limit (http.max_body_bytes)"
ALERT_STORE_UNAVAILABLE = "incident store (Redis) unavailable; nothing was recorded, retry later"
INCIDENTS_NONE = "No incidents."
INCIDENTS_UNKNOWN = "no incident {incident_id!r} (see `incident-bot incidents`)"
INCIDENTS_REDIS_DOWN = "cannot reach Redis at {url}: {reason}"
SERVE_REDIS_DOWN = ("cannot reach Redis at {url}: {reason} (serve needs Redis at start; "
                    "check redis_url / REDIS_URL)")
AUDIT_EMPTY = "{incident_id}: no audit entries"
SILENCE_BAD = "cannot silence: {reason}"
SILENCE_ADDED = "silenced {host}/{kind} until {until} (by {author})"
SILENCE_REMOVED = "silence on {host}/{kind} removed"
SILENCE_NOT_FOUND = "no silence on {host}/{kind}"
SILENCES_NONE = "No active silences."
AGENT_NO_TOKEN = "INCIDENT_BOT_ALERT_TOKEN is not set: the agent needs it to post alerts"
AGENT_BAD_URL = "--url must be an http(s) URL, got {url!r}"

# --- remediation that holds, in the flow (issue 17) --------------------------------------
REM_LASTING_DROPIN = ("lasting fix for {unit} (Restart={restart}): a drop-in with "
                      "Restart=on-failure and a start guard, so its next crash does not put it "
                      "back on the GPUs")
FLOW_REVERT_RISK = "restarts what was stopped"
FLOW_CLEANUP_REASON = ("delete {n} cache, checkpoint and core-dump item(s), {size} "
                       "({need} needed to get under the full mark):\n{preview}")
FLOW_REBOOT_REQUESTED = (":arrows_counterclockwise: Reboot of {host} requested (approved by "
                         "<@{who}>; boot {boot}): every process on it stops and the units "
                         "enabled at boot start again. The bot re-diagnoses when {host} answers "
                         "with a new boot id (waiting up to {mins} min).")
FLOW_REBOOT_OTHER = ("{host} is rebooting (incident {id}, approved by <@{who}>): what this "
                     "incident found may change when it is back.")
FLOW_REBOOT_BACK_OK = "{host} is back (new boot {boot}); re-diagnosed: the problem is gone."
FLOW_REBOOT_BACK_STILL = "{host} is back (new boot {boot}), but the problem is still there: {still}"
FLOW_REBOOT_NOT_BACK = ("{host} did not answer with a new boot id within {mins} min of the "
                        "reboot request: check its console.")
REM_PROPOSE_REBOOT_NVSWITCH = ("reboot {host}: on an NVSwitch host that resets every GPU and the "
                               "fabric together (by hand instead: stop nvidia-fabricmanager, "
                               "`nvidia-smi -r` with every GPU idle, start it again)")
FLOW_CLEANUP_PART_REASON = "delete only {what}: {n} item(s), {size}"
FLOW_CLEANUP_FOUND = "{n} cleanup candidate(s) holding {size}"
FLOW_CLEANUP_SHORT = ("a cleanup cannot free enough on {mount}: what may go under {where} holds "
                      "{have}, {mount} needs {need} ({gap} short)")
FLOW_CLEANUP_NONE = ("nothing under {where} may go (caches, old checkpoints, core dumps, rotated "
                     "logs): {mount} needs {need} ({gap} short)")
FLOW_REBOOT_OTHER_GONE = "{host} is back (new boot {boot}); re-diagnosed: this problem is gone."
FLOW_REBOOT_OTHER_AGAIN = ("{host} is back (new boot {boot}), but this problem is not gone: "
                           "{still}. Diagnosing this incident again.")

# --- fleet policy (issue 28) ------------------------------------------------------------
POLICY_NONE = "no policy matches: a person approves"
POLICY_APPROVE = "policy {policy} asks for a click"
POLICY_AUTO = "runs without a click under policy {policy}"
POLICY_SHADOW = "would have run {kind} under policy {policy} (shadow mode: a person approves)"
POLICY_LIMIT = "limit reached: {n_hosts} in the last {period} ({hosts})"
POLICY_WINDOW = "policy {policy} does not act on its own during {window}"
POLICY_BREAKER = ("circuit breaker open: {n_hosts} acted on automatically in the last {period} "
                  "(cap {cap}); every automatic action asks for a click")
POLICY_BREAKER_TRIPPED = ("incident-bot fleet circuit breaker tripped by {host} under policy "
                          "{policy}: {n_hosts} acted on automatically in the last {period} "
                          "reached the cap of {cap}; every automatic action asks for a click "
                          "until it closes")
POLICY_REFUSED = "policy {policy} lets only {who} approve {kind} on {host}"
POLICY_SILENCED = "inside maintenance window {window} ({hosts}): recorded, not posted"
POLICY_REFUSED_CLICK = ("You are not allowed to approve or deny `{kind}` on {host}: policy "
                        "`{policy}` lets only {who} approve it. This attempt was recorded.")
POLICY_AUTO_DONE = (":robot_face: {done} `{target}` on {host} without a click, under policy "
                    "`{policy}` ({why}). Revert below if this was wrong.")
POLICY_SHADOW_NOTE = (":eyes: Shadow mode: policy `{policy}` would have run `{kind}` on {host} "
                      "without a click. Nothing ran; approve below as usual.")
POLICY_FELL_BACK = ":raised_hand: Policy `{policy}` did not run `{kind}` on {host}: {reason}."
POLICY_AUTO_WHY = "{n} of {max} hosts in the last {period}: {hosts}"
POLICY_BREAKER_OPEN_CLI = ("circuit breaker open: {n_hosts} acted on automatically in the last "
                           "{period} ({hosts}), cap {cap}; every automatic action asks for a "
                           "click")
POLICY_BREAKER_CLOSED_CLI = "circuit breaker closed: automatic actions allowed (cap {cap})"
POLICY_BREAKER_RESET_CLI = "circuit breaker closed by {actor}; its page resolves on the next tick"
SILENCE_MAINTENANCE = "{hosts}/{kinds}  every {every}  (maintenance window)  {reason}"

# --- issue 26: Slurm drain and resume --------------------------------------------------
SLURM_DRAIN_RISK = ("no new job starts on the node; jobs already running there finish "
                    "(nothing is killed)")
SLURM_RESUME_RISK = ("the scheduler starts jobs on the node again: only after the health "
                     "gate passed")
SLURM_NODE_NOW = "node {node} is {view}"
SLURM_REASON_NOW = "reason: {reason}"
SLURM_JOBS_NONE = "no job runs there"
SLURM_JOBS = "{n} job(s) still run there: {jobs}"
SLURM_JOB = "{id} ({user}, {name}, {left} left)"
SLURM_JOB_UNLIMITED = "{id} ({user}, {name}, no time limit)"
SLURM_DRAINED_BY_PERSON = ("node {node} is already {view} with a reason a person set: "
                           "\"{reason}\" (by {who}); the bot does not overwrite it, ask them")
SLURM_DRAINED_BY_OTHER = ("node {node} is already {view} by incident-bot for {other} "
                          "(\"{reason}\"); this incident leaves that drain as it is")
SLURM_NOT_FOUND = "Slurm does not know node {node}: {why}"
SLURM_ALREADY_DRAINED = "already drained for this incident"
SLURM_NOT_DRAINED = "node not drained"
SLURM_RESUME_PERSON = ("node {node} was drained by a person (\"{reason}\", by {who}); the bot "
                       "returns only nodes it drained itself")
SLURM_PROPOSE_DRAIN = ("drain {node} in Slurm first, so that no new job lands on a broken GPU: "
                       "{finding}")
SLURM_PROPOSE_SCANCEL = ("PID {pid} belongs to Slurm job {job} ({user}): cancel or requeue "
                         "the job through Slurm instead of killing its process")
SLURM_JOB_HOLDER = ("PID {pid} ({mem}) belongs to Slurm job {job} of {user}: the bot does not "
                    "kill a job's process; cancel or requeue the job through Slurm "
                    "(scancel {job}, scontrol requeue {job})")
SLURM_REQUEUE_RISK = ("the job stops now and goes back to the queue; it restarts from its "
                      "last checkpoint on another node (work since then is lost)")
SLURM_CANCEL_RISK = "the job ends now for good; its user must submit it again"
SLURM_JOB_NOT_HERE = "Slurm job {job} does not run on node {node} (running there: {jobs})"
SLURM_JOB_GONE = "Slurm job {job} no longer runs on node {node}"
SLURM_PROPOSE_REQUEUE = ("requeue Slurm job {job} ({user}): it holds GPU memory on {node} "
                         "(PID {pid}); the scheduler restarts it elsewhere")
SLURM_PROPOSE_CANCEL = "cancel Slurm job {job} ({user}) on {node} for good (PID {pid})"
SLURM_RETURN_REASON = "Return {node} to Slurm: the health gate passed on {host}"
SLURM_GATE_PASSED = "health gate passed: {node} can go back to Slurm (approve the resume)"
SLURM_GATE_FAILED = "health gate failed: {node} stays drained ({why})"

# --- edges that refuse well (issue 25) ----------------------------------------------------
SLACK_UNSIGNED = "missing X-Slack-Signature or X-Slack-Request-Timestamp"
SLACK_BAD_TIMESTAMP = "X-Slack-Request-Timestamp is not a number"
SLACK_STALE = "X-Slack-Request-Timestamp is more than 5 minutes from now"
SLACK_BAD_SIGNATURE = "invalid Slack signature"
SLACK_TOO_LARGE = "request body over the {limit}-byte limit"
SLACK_NOT_UTF8 = "body is not UTF-8 text"
SLACK_BAD_JSON = "{where} is not valid JSON"
SLACK_BAD_SHAPE = "{field} must be {want}"
SLACK_REFUSED = "request refused: {reason}"
SLACK_REPLAYED = ("this signed request was already received (same timestamp and signature): "
                  "a replay, refused")
SLACK_STORE_UNAVAILABLE = "the bot's store (Redis) is unavailable; nothing was done, retry shortly"
CLICK_OTHER_MESSAGE = ("This button is not on {id}'s message (it came from another message): "
                       "nothing was done. Use the buttons on {id}'s current message.")
SLACK_UNAVAILABLE_CLICK = ("Slack did not take the bot's answer to that click (it is failing "
                           "or rate-limiting); try again in a moment.")
STORE_UNAVAILABLE_CLICK = ("The bot's store (Redis) is not taking changes right now; nothing "
                           "was done. Try again in a moment.")
BODY_TOO_SLOW = "request body not received within {seconds:g} s"
BAD_CONTENT_LENGTH = "Content-Length is not a number"
JSON_TOO_DEEP = "JSON nested too deeply (at most {depth} levels)"
JSON_BAD_NUMBER = "a number in the JSON is too long"
JSON_BAD_TEXT = "a string in the JSON is not valid Unicode (lone surrogate)"
HOST_NOT_IN_INVENTORY = "{host} is not in the inventory"
AUDIT_UNKNOWN_USER = "unknown user"  # the actor of a request that named no user
UNKNOWN_USER_REFUSED = "Refused: the request did not say who sent it."
SLASH_SNOOZE_TOO_LONG = "a snooze lasts at most {days} days."
SLASH_SILENCE_TOO_LONG = "a silence lasts at most {days} days."
# --- the flow's Slurm drain, gate and return (issue 26) --------------------------------------
SLURM_NOW_DRAINED = "{node} is now DRAINED: no job runs there any more. {status}"
SLURM_PROPOSE_REBOOT = ("{node} is drained and no job runs there: reboot {host} to bring its "
                        "GPUs back; the node returns to Slurm only after the health gate")
SLURM_RESUME_BLOCKED = "{node} stays drained: the health gate failed on {host} ({why})"
SLURM_DRAINED_NONE = "No Slurm node is draining or drained."
SLURM_DRAINED_LINE = "• {node} {view} for {age}, by {who}: {reason}"
SLURM_DRAINED_HEAD = "Drained Slurm nodes ({n}):"
SLURM_DRAINED_NO_HOST = "No inventory host is a Slurm node (hosts.NAME.slurm_node)."
SLURM_DRAINED_UNREADABLE = "Could not read the Slurm nodes: {why}"
HOME_DRAINED = "Drained Slurm nodes"
DIGEST_DRAINED = "Drained Slurm nodes: {nodes}"
ESCALATION_DRAINED_HEADER = "Drained too long: Slurm node {node}"
ESCALATION_DRAINED_TEXT = ("{mention}:rotating_light: Slurm node {node} has been {view} by "
                           "incident-bot for {age} and its incident {incident} is closed: "
                           "nobody will return it. Repair it and return it through the health "
                           "gate, or resume it by hand. Reason: {reason}")

# --- issue 27: /ir stats -------------------------------------------------------------------
SLASH_STATS_TOO_LONG = "stats look back at most {days} days."
STATS_HEAD = "*Incidents opened in the last {period}*"
STATS_BY_KIND = "_By kind_"
STATS_BY_HOST = "_By host_"
STATS_NONE = "No incidents were opened in the last {period}."


# --- proposals that do what they say (issue 29, deliverable 4) ---------------------------
PLAN_NOT_PROPOSED = "not proposed: {kind} ({why})"
REM_CLEAN_PARTIAL = ("freed {freed} of {needed} needed on {mount}: still {pct:.0f}% used "
                     "(threshold {full}%); next: {next}")
REM_CLEAN_NEXT = ("delete more under {mount} (the diagnosis lists its largest directories) or "
                  "move data off it, then check it again")
REM_CLEAN_BELOW = "{mount} now {pct:.0f}% used (threshold {full}%)"
REM_GPU_RESET_HOLDERS = "stopped {units} for the reset, started again: {after}"
REM_REBOOT_BACK = "{host} back after {secs:.0f} s with a new boot id ({boot})"
REM_REBOOT_NOT_BACK = "{host} did not come back within {secs:.0f} s (boot id still {boot})"
REM_PARTIAL = "{title} {subject} on {host}, not enough yet: {detail}"
DIGEST_RESPONSE_TITLE = "*Response* (incidents opened in the period, per kind)"


# --- issue 29 (deliverable 5): every rung the bot climbed, in the result ---------------------
REM_TERM_THEN_KILL = "sent SIGTERM to {subject}, then SIGKILL after {grace:g} s"
REM_TERM_EXITED = "sent SIGTERM to {subject}, which exited {secs} s later (no SIGKILL needed)"
REM_RUNGS_NO_EFFECT = "{rungs}, but the effect did not show: {detail}"

# --- config check (incident-bot config check, serve at start) --------------------------
CHECK_OK = "{where}: no problems ({hosts} hosts{probed})"
CHECK_NOT_SET = "not set: the bot cannot log in to this host without it"
CHECK_UNREADABLE = "{path}: no such file, or not readable by this user"
CHECK_UNREACHABLE = "could not reach {address}: {why}"
CHECK_PROBE_FAILED = "reached {address}, but `true` exited {status}"
CHECK_NO_SECRET = "not set: {why}"
CHECK_WHY = {
    "SLACK_BOT_TOKEN": ("the bot cannot post to Slack (chat_backend: slack; `serve --alerts-only` "
                        "serves the alert webhooks without it)"),
    "SLACK_SIGNING_SECRET": "Slack's requests cannot be verified (chat_backend: slack)",
    "SLACK_APP_TOKEN": "Socket Mode needs an app-level xapp- token",
}
CHECK_NO_ROUTING_KEY = "environment variable {env} is not set (the Events v2 integration key)"
CHECK_NO_ALERT_TOKEN = ("environment: INCIDENT_BOT_ALERT_TOKEN is not set: every alert webhook "
                        "call will be answered 401")
CHECK_UNKNOWN_BACKEND = "unknown backend {name!r} (choose from {names})"

# --- the demo (incident-bot demo) -------------------------------------------------------
DEMO_STARTING = ("Starting the demo's world: a private Redis, a simulated GPU host (a real "
                 "OpenSSH sshd), an extraction left by a crash, an RQ worker, the bot.")
DEMO_STEP_LOADING = "loading the bot's code (the flow, the chat, the stores) …"
DEMO_STEP_REDIS = "Redis on 127.0.0.1:{port} (private, append-only file on)"
DEMO_STEP_REDIS_GIVEN = "Redis at {url} (given)"
DEMO_STEP_SIM = "simulated host {host}: sshd on 127.0.0.1:{port}, booted {ago} ago (seed scenario)"
DEMO_STEP_EXTRACT_START = ("the extraction that was running: the real extractor writes the first "
                           "samples of {total} (loads torch) …")
DEMO_STEP_EXTRACT = ("{written}/{total} samples written before the VM died: the last one cut "
                     "short, one more half-written as a temporary file")
DEMO_STEP_WORKER = "RQ worker for {host}'s queue (pid {pid})"
DEMO_STEP_HTTP = "the bot's HTTP service on {url}; the flow and the terminal chat"
DEMO_CRASH = ("VM {host} restarted {ago} ago; extraction {job} was {done}/{total} done ({pct}) "
              "when it died")
DEMO_ALERT_SUMMARY = "{host} booted {ago} ago"
DEMO_PROMPT = "you are {user}; type e.g. 'approve 1' or 'deny 1 \"why\"' > "
DEMO_TYPES = "{user} types: {line}"
DEMO_NUMBERS = ("extraction {job}: {done_before}/{total} done when the VM died; on resume "
                "{resumed}/{total} intact ({repairs}); {written} written → {done}/{total}")
DEMO_NUMBERS_DISAGREE = "the extraction's numbers do not add up (see the line above)"
DEMO_TIMINGS_TITLE = "step timings (a person's time to decide is not counted)"
DEMO_WAITED = "waiting for your decision: {secs:.2f} s (not counted)"
DEMO_STEP_SETUP = "set-up: Redis, sim host, crashed extraction, worker, HTTP"
DEMO_STEP_ALERT = "alert received (Alertmanager webhook → incident)"
DEMO_STEP_DIAGNOSIS = "message posted, diagnosis over SSH, findings edited in"
DEMO_STEP_APPROVAL = "approval → stop/disable → GPUs verified free → resume queued"
DEMO_STEP_RESUME = "extraction resumed and finished (RQ worker)"
DEMO_FINISHED = ("demo finished in {secs:.1f} s: stopped {stopped}; removed {workdir}; "
                 "nothing left running")
DEMO_LEFT_BEHIND = "demo finished in {secs:.1f} s, but left behind: {what}"
DEMO_NO_TERMINAL = "no terminal to approve from: run `incident-bot demo --yes`"
DEMO_INPUT_ENDED = "input ended before a decision: nothing was run on the host"

# --- each action's title (past tense, for summaries) and risk, moved unchanged from the
# catalog into their action classes (bot/remediation/actions/) --------------------------------
ACT_TITLE_STOP_DISABLE = "stopped and disabled"
ACT_RISK_STOP_DISABLE = "stops the service now and keeps it from starting at boot"
ACT_TITLE_MASK = "stopped and masked"
ACT_RISK_MASK = "stops the service; nothing can start it until it is unmasked"
ACT_TITLE_REVERT = "restored"
ACT_RISK_REVERT = "starts the service again if it was running: it may take the GPUs back"
ACT_TITLE_MASK_FORCE = "stopped and force-masked"
ACT_RISK_MASK_FORCE = ("replaces the unit's own file in /etc/systemd/system with a link to "
                       "/dev/null: the file is lost (back it up first); unmask leaves no unit")
ACT_TITLE_TERMINATE = "terminated"
ACT_RISK_TERMINATE = "SIGTERM, then SIGKILL after a grace period; unsaved work is lost"
ACT_TITLE_SIGTERM = "sent SIGTERM to"
ACT_RISK_SIGTERM = "asks the process to exit; waits its unit's TimeoutStopSec"
ACT_TITLE_SIGKILL = "killed"
ACT_RISK_SIGKILL = "SIGKILL: no cleanup, unsaved work is lost; GPU memory may stay held"
ACT_TITLE_GPU_RESET = "reset"
ACT_RISK_GPU_RESET = ("resets the GPU (or every GPU): refused while any process uses it; what "
                      "holds its device files (persistenced, DCGM, dcgm-exporter as a unit or a "
                      "container, Fabric Manager where needed) is stopped around the reset and "
                      "started again, also when the reset fails")
ACT_TITLE_REBOOT = "rebooted"
ACT_RISK_REBOOT = "reboots the host: every process on it stops; units enabled at boot start"
ACT_TITLE_RMA = "handed to RMA"
ACT_RISK_RMA = ("runs nvidia-bug-report.sh on the host (a few minutes of driver queries); the "
                "node stays out of service for the RMA")
ACT_TITLE_DROPIN = "installed the incident-bot drop-in for"
ACT_RISK_DROPIN = "changes how systemd restarts the unit (Restart=on-failure, a start guard)"
ACT_TITLE_DROPIN_REVERT = "removed the incident-bot drop-in for"
ACT_RISK_DROPIN_REVERT = "the unit restarts as its own file says again"
ACT_TITLE_JOURNAL = "vacuumed"
ACT_RISK_JOURNAL = "deletes the oldest archived journal files"
ACT_TITLE_CLEANUP = "deleted"
ACT_RISK_CLEANUP = "deletes the listed cache, checkpoint and core files for good"
ACT_TITLE_SLURM_DRAIN = "drained"
ACT_TITLE_SLURM_RESUME = "resumed"
ACT_TITLE_SLURM_REQUEUE = "requeued"
ACT_TITLE_SLURM_CANCEL = "cancelled"
ACT_TITLE_RESUME = "resumed"
ACT_RISK_RESUME = "restarts the extraction where it stopped"
ACT_TITLE_RESUME_OVERRIDE = "resumed despite the failed health gate"
ACT_RISK_RESUME_OVERRIDE = ("runs the extraction on a host whose GPU health gate failed: it may "
                            "crash again or write wrong results")
ACT_PLAN_RESUME = "(on the bot) resume extraction job {job}{forced}"
ACT_PLAN_FORCED = " despite the failed health gate"
ACT_UNDO_REASON = "undo {kind}: back to the captured state"
ACT_RESUME_FREED_REASON = "GPUs on {host} are free; job {job} was interrupted"
