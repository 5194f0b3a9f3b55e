"""The incident message and its thread: flow notes, states, headline, progress, Home tab."""

from __future__ import annotations

# --- incident flow ---------------------------------------------------------------------
FLOW_UNKNOWN_HOST = "{host} is not in the inventory: nothing was run."
FLOW_NO_FINDINGS = "no findings"
FLOW_NOT_ACTABLE = "Not running {kind}: incident {id} is {state}. Ask for a fresh diagnosis (`/ir diag HOST`)."
FLOW_NOT_ACTING = "Not running {kind}: the finding no longer holds. Now: {now}"
# issue 35: a re-probe that fails is "could not check", never "no longer holds"
FLOW_REPROBE_FAILED = "the host could not be read before acting ({why}); nothing ran (the approved step: {kind}). Retry once it answers"
FLOW_REPROBE_SAID = "Could not check: {text}."
FLOW_NO_COMMANDS = "(no commands ran)"
MSG_CMD_TIMED_OUT = "timed out"
MSG_CMD_NO_STATUS = "no exit status: {why}"
FLOW_NO_ANSWER = "the host did not answer"
FLOW_TIMED_OUT = "timed out"
FLOW_REVERT_WITHDREW = "withdrawn: the step it followed was reverted"
FLOW_ALERT_CLEARED_FAULT = "The alert cleared, but the fault is still there: {fault}. The incident stays open until a probe shows otherwise or a person resolves it."
FLOW_REVERT_REASON = "Restore the unit-file and active state captured before the action."
FLOW_RESUME_REASON = "The GPUs are free: resume the extraction that the restart interrupted."
FLOW_DENIED = "Denied by {user}: {kind} will not run. Reason: {reason}"
FLOW_PROGRESS_DONE = "Extraction finished: {summary}"
DIAG_MOUNT_READ_ONLY = "expected mount {mount} is mounted read-only"

# --- the incident message from stored state, and incident-level decisions (approvals) ------
VIEW_RUNNING = ":arrows_counterclockwise: Approved by {who} · running: {kind}…"
VIEW_DIAGNOSIS_FAILED = ":warning: *Diagnosis failed:* {reason}. Nothing was run; retry once the host is reachable."
VIEW_NO_ACTION = ":mag: *Nothing to run automatically.* Also found: {found}. Resolve once handled by hand."
VIEW_NO_ACTION_BARE = ":mag: *Nothing to run automatically.* Resolve once handled by hand."
VIEW_ACTION_FAILED = ":x: *Action failed:* {what}. Retry with a fresh diagnosis, or escalate."
VIEW_SNOOZED = ":zzz: Snoozed by {who} until {until} UTC"
VIEW_ACKED = ":eyes: Acknowledged by {who}"
VIEW_RESOLVED_BY = ":white_check_mark: Resolved by {who}"
VIEW_WITHDRAWN = ":heavy_minus_sign: Withdrawn: {reason}"
VIEW_ESCALATED = ":rotating_light: Escalated by {who}"
WITHDRAWN_REASON = "another action was approved"
APPROVAL_WITHDRAWN = "This action was withdrawn ({reason}); nothing was run."
INCIDENT_NOT_ALLOWED = "You are not allowed to {verb} incidents. Approvers: {who}."
INCIDENT_UNKNOWN = "No incident {id}."
INCIDENT_CANNOT = "Incident {id} is {state}: it cannot be {verb} now."
INCIDENT_ACKED = "Acknowledged incident {id}; escalation stops."
INCIDENT_RESOLVED = "Resolved incident {id}."
INCIDENT_SNOOZED = "Snoozed incident {id} until {until} UTC."
INCIDENT_RETRYING = "Diagnosing incident {id} again."
INCIDENT_ESCALATED = "Escalated incident {id}."
FLOW_INTERRUPTED = "{kind}: interrupted (the bot stopped while it ran); check the host, then Retry"

# --- messages read at a glance: headline, state, action, notification (issue 15) -------
MSG_HEADLINE_IDLE = "{host}: {gpus} held at {util}{idle_for} by {who}{started}"
MSG_IDLE_FOR = " for {duration}"
MSG_STARTED_AT_BOOT = ", auto-started at boot"
MSG_STARTED_AFTER_BOOT = ", started {after} after boot"
MSG_HEADLINE_GENERIC = "{host}: {title}"
MSG_FREES = "frees {mem}"
MSG_ACTION = "*Proposed:* {sentence}. *Risk:* {risk}."
MSG_ACTION_NO_RISK = "*Proposed:* {sentence}."
MSG_ACTION_STOP_DISABLE = "stop {unit} and keep it from starting at boot"
MSG_ACTION_MASK = "mask {unit} so nothing can start it, not even by hand"
MSG_ACTION_TERMINATE = "end PID {pid}"
MSG_ACTION_RESUME = "resume extraction {job}"
MSG_ACTION_JOURNAL = "vacuum the systemd journal down to {size}"
MSG_ACTION_GENERIC = "run {kind} on {params}"
MSG_NOTIFY = "{mention}{host}: {cause}. {ask}"
MSG_ASK_APPROVE = "Approve or deny: {sentence}?"
MSG_ASK_STATE = "Now {state}."
MSG_CAUSE_IDLE = "{who} holds {gpus} at {util}"
MSG_EVIDENCE_TITLE = "Evidence: {n} GPU{s}, utilisation is the highest of {samples} sample{ss}"
MSG_EVIDENCE_BUTTON = "Raw evidence"
MSG_APPROVE = "Approve"
MSG_DENY = "Deny"
MSG_STATE_LINE = "{icon} {label} · incident {id} · opened {age} ago"
MSG_PROGRESS_MEASURING_LINE = "{bar} {pct} · {done}/{total} · measuring…"
MSG_PROGRESS_STILL_LINE = "{bar} {pct} · {done}/{total}"
MSG_PROGRESS_LINE = "{bar} {pct} · {done}/{total} · {rate} · done {eta}"
MSG_PROGRESS_FINISHED = "{name}: {state} {done}/{total} in {duration} · mean {rate} · {written} written, {skipped} skipped, {repaired} repaired"
HOME_FLEET = "Fleet"
HOME_INCIDENTS = "Open incidents"
HOME_JOBS = "Running extractions"
HOME_HOST = "{badge}*{host}* · {n} GPUs: {busy} busy · {idle} held idle · {free} free · {broken} broken"
HOME_HOST_UNSAMPLED = "*{host}* · {n} GPUs expected: no sample yet"
HOME_INCIDENT = "{icon} *{id}* {host} · {kind} · {state} · open {age}"
HOME_JOB = "*{name}* on {host} · {bar} {pct} · {done}/{total} · {rate}"
HOME_NO_HOSTS = "No host samples yet (is the sampler or agent running?)"
HOME_NO_INCIDENTS = "Nothing open."
HOME_NO_JOBS = "No extraction is running."
HOME_UPDATED = "Updated {when}"
HOME_AGE_NEW = "under 1 min"
DIGEST_WASTE_HOSTS = "GPU-hours wasted (VRAM held at ≤{util:g}% utilisation): *{total}* · by host: {hosts}"
DIGEST_WASTE_UNITS = "Wasted by unit: {units}"
MSG_PROBE_LINE = "*{name}* · {status} · {duration}"
MSG_PROBE_EXIT = "exit {code}"
MSG_PROBE_TIMED_OUT = "timed out"
MSG_PROBE_ERROR = "error: {error}"
MSG_PROBE_NO_OUTPUT = "(output not kept with the stored diagnosis)"
MSG_EVIDENCE_MORE = "… {probes} not shown here; see `incident-bot diagnose {host} --json`"


# --- the one renderer's parent message (issues 14 + 15 wired) ------------------------
MSG_GROUP_HOSTS = "{n} hosts alerted together: {hosts}{more}"
MSG_ALSO_FOUND = "Also found: {titles}"
MSG_REVERT_AVAILABLE = "*Revert available*"
MSG_APPROVAL_EXPIRES = "Approval expires {when} UTC"
MSG_EVIDENCE_POSTED = "Raw evidence of {id} posted in its thread."
MSG_EVIDENCE_NOT_YET = "Incident {id} has no diagnosis yet: nothing to show."
MSG_EVIDENCE_NO_THREAD = "Incident {id} has no message yet to reply under."


# --- disk cleanup: preview, sentences, per-part buttons (issue 17) --------------------
MSG_ACTION_CLEANUP = "delete {n} item{s} ({what}), freeing {size} of the {need} needed"
MSG_CLEANUP_SHORT = " ({gap} short: the disk stays full)"
MSG_CLEANUP_KEEPS = "; keeps the newest {k} checkpoints of each run ({runs})"
MSG_ACTION_CLEANUP_PART = "delete only {what}: {n} item{s}, {size}"
MSG_CLEANUP_MIXED = "mixed items"
MSG_CLEANUP_TITLE = "*Cleanup preview:* {n} item{s}, {total} in all; {need} needed"
MSG_CLEANUP_MORE = "… {n} more item{s}, {size}"
MSG_CLEANUP_PARTS = "*Or delete only one part* (Deny above declines them all):"
MSG_CLEANUP_PART_BUTTON = "{what} · {size}"


# --- postmortem timeline (issue 27) ----------------------------------------------------
PM_TITLE = "# {id} postmortem: {summary}"
PM_FACTS_HEAD = "| | |\n| --- | --- |"
PM_FACT = "| {label} | {value} |"
PM_HOST, PM_KIND, PM_SEVERITY, PM_STATE = "Host", "Kind", "Severity", "State"
PM_DETECTED, PM_RESOLVED, PM_SLACK = "Detected", "Resolved", "Slack thread"
PM_TTA, PM_TTM, PM_TTR = "Time to acknowledge", "Time to mitigate", "Time to resolve"
PM_GPU_HOURS = "GPU-hours lost"
PM_GPU_HOURS_VALUE = "{hours:.3f} ({gpus} GPUs × {span}, detection to mitigation)"
PM_PEOPLE = "People"
PM_NOT_YET = "not yet"
PM_BY = "{value} ({who})"
PM_TIMELINE = "## Timeline"
PM_TIMELINE_HEAD = ("| Time (UTC) | Since detection | Step | Who | What |\n"
                    "| --- | --- | --- | --- | --- |")
PM_TIMELINE_ROW = "| {at} | +{since} | {step} | {who} | {what} |"
PM_CHANGES = "## What changed on the host"
PM_CHANGES_NONE = "Nothing was run on the host."
PM_CHANGE = "- `{kind}` {params}: {outcome}, approved by {approver}"
PM_CHANGE_CMD = "  - `{command}` → {exit}"
PM_REVERT = "  - to revert: `{line}`"
PM_REVERT_CMDS = "    (runs {commands})"
PM_NO_REVERT = "  - no revert recorded"
PM_EVIDENCE = "## Evidence"
PM_EVIDENCE_HASH = "- Evidence shown to the approver: `{hash}`"
PM_FINDING = "- {severity}: `{code}`: {title}"
PM_PROBES = "- {n} probes run{failed}"
PM_PROBES_FAILED = "; not exit 0: {names}"
PM_VERIFIED = "- Verified: {text}"
PM_UNKNOWN_INCIDENT = "no incident {incident_id}"
MSG_RUNBOOK_BUTTON = "Runbook: {code}"
PM_THREAD = ("*Postmortem {id}*: acknowledged {tta}, mitigated {ttm}, resolved {ttr}; "
             "{gpu_hours} GPU-hours lost ({gpus} GPUs).")
PM_THREAD_CHANGE = "Changed on {host}: `{kind}` {params} ({outcome}); revert: `{revert}`"
PM_THREAD_MORE = "The full timeline: `incident-bot postmortem {id}`"
PM_IN = "in {d}"
STATS_ROW = "*{key}*: {n} incident{s} · MTTA {mtta} · MTTR {mttr} · fixed with one click {share}"

# --- maintenance windows on the Home tab (issue 28) ---------------------------------------
HOME_MAINTENANCE = "Maintenance windows (alerts recorded, not posted)"
HOME_MAINTENANCE_LINE = "{now}`{hosts}`{kinds}: {every}{reason}"
HOME_MAINTENANCE_NOW = ":construction: now: "

# --- issue 26: Slurm actions as phrases ------------------------------------------------
MSG_ACTION_SLURM_DRAIN = ("drain {node} in Slurm, so no new job lands on it (running jobs "
                          "finish), reason \"{reason}\"")
MSG_ACTION_SLURM_RESUME = "return {node} to Slurm"
MSG_ACTION_SLURM_REQUEUE = "requeue Slurm job {job} on {node} through the scheduler"
MSG_ACTION_SLURM_CANCEL = "cancel Slurm job {job} on {node} through the scheduler"

# --- issue 29: no silent incident ----------------------------------------------------------
FLOW_DIAGNOSIS_ERROR = "the bot hit an internal error while diagnosing (error id {error_id})"

# --- re-driving interrupted work (issue 24) ---------------------------------------------
FLOW_DIAGNOSIS_INTERRUPTED = "diagnosis interrupted {n} times (the bot or Redis stopped while it ran)"

# --- headlines and "also found" (issue 29) ------------------------------------------
MSG_GPUS_GROUPED = "GPUs {indexes} {verdict}: {why}"

# --- the flow's Slurm drain, gate and return (issue 26) --------------------------------------
MSG_ACTION_REBOOT = "reboot the host (every process on it stops)"

# --- issue 25 (h25b): stale approvals after a resolve, /ir diag authority -------------------
DIAG_NOT_ALLOWED = "You are not allowed to run a diagnosis on {host}. Approvers: {who}."
APPROVAL_AFTER_RESOLVE = "Incident {id} was resolved at {when} UTC by {by}: nothing ran."
RESOLVED_BY_ALERT = "the alert"
RESOLVED_BY_BOT = "the bot"
WITHDRAWN_RESOLVED = "incident resolved"

# --- issue 29 (deliverable 5): messages that match the outcome --------------------------
MSG_LEAD_FIXED = "Fixed: {done}"
MSG_LEAD_REVERTED = "Reverted: {done}"
MSG_LEAD_RESUMED = "Resumed: {done}"
MSG_LEAD_NOW = "{lead}; {now} since {when}"
MSG_WAS = "Was: {headline}"
MSG_RESULT_TITLE = "*Result*"
MSG_REVERT_BUTTON = "Revert"
MSG_REVERT_CONFIRM = "Undo the fix on {host}? {sentence}"
# what a verified action did, per catalog kind (the lead of a Verified/Resumed/Resolved message)
MSG_DONE_STOP_DISABLE = "{unit} stopped and disabled"
MSG_DONE_MASK = "{unit} stopped and masked"
MSG_DONE_MASK_FORCE = "{unit} stopped and force-masked"
MSG_DONE_REVERT = "{unit} put back as it was ({unit_file_state}, {active_state})"
MSG_DONE_DROPIN = "start guard added to {unit} (drop-in)"
MSG_DONE_DROPIN_REVERT = "the incident-bot drop-in removed from {unit}"
MSG_DONE_SIGTERM = "sent SIGTERM to PID {pid}"
MSG_DONE_SIGKILL = "killed PID {pid} (SIGKILL)"
MSG_DONE_TERMINATE = "PID {pid} ended"
MSG_DONE_GPU_RESET = "{gpu_label} reset"
MSG_DONE_REBOOT = "host rebooted and back"
MSG_DONE_JOURNAL = "journal vacuumed down to {size}"
MSG_DONE_SLURM_DRAIN = "{node} drained in Slurm"
MSG_DONE_SLURM_RESUME = "{node} returned to Slurm"
MSG_DONE_SLURM_REQUEUE = "Slurm job {job} requeued"
MSG_DONE_SLURM_CANCEL = "Slurm job {job} cancelled"
MSG_DONE_RESUME = "extraction {job} resumed"
MSG_DONE_RESUME_OVERRIDE = "extraction {job} resumed despite the failed health gate"
# every catalog kind as a sentence a person acts on (never "run KIND on key value")
MSG_ACTION_MASK_FORCE = ("replace {unit}'s own unit file with a link to /dev/null so nothing "
                         "can start it")
MSG_ACTION_REVERT = ("undo the fix: put {unit} back as it was ({unit_file_state}, "
                     "{active_state})")
MSG_ACTION_DROPIN = ("keep {unit} from grabbing the GPUs again: add a start guard (drop-in), "
                     "restart only on failure, stop within {timeout_stop_s} s")
MSG_ACTION_DROPIN_REVERT = "remove the incident-bot drop-in (start guard) from {unit}"
MSG_ACTION_SIGTERM = "ask PID {pid} to exit (SIGTERM)"
MSG_ACTION_SIGKILL = "kill PID {pid} (SIGKILL)"
MSG_ACTION_GPU_RESET = "reset {gpu_label}"
MSG_ACTION_RMA = ("collect the RMA bug report (nvidia-bug-report.sh) for {incident} "
                  "and keep the node out of service")
MSG_ACTION_RESUME_OVERRIDE = "resume extraction {job} despite the failed health gate"
MSG_ACTION_CLEANUP_FILES = "delete {n} listed file{s}"
MSG_PLAN_APPROVED = "{mark}: {sentence}"
MSG_LEAD_DONE = "Done: {done}"
MSG_NOT_FIXED = "Not fixed by this: {headline}"
# issue 35: the words for an action that did not hold, or that nobody could check
MSG_LEAD_NOT_FIXED = "Not fixed: {done}"
MSG_LEAD_REVERT_FAILED = "Revert did not take: {done}"
MSG_LEAD_COULD_NOT_CHECK = "Could not check: {done}"
MSG_STILL = "The problem: {headline}"
MSG_AS_LAST_SEEN = "Last seen: {headline}"
MSG_REVERT_BACK = "the problem is back: {now}"
MSG_REVERT_NOT_BACK = "the problem is not back: {now}"
MSG_PLAN_UNDONE = "{line}, then undone by the revert"
VIEW_NEXT_STEP = "Retry diagnoses again (nothing runs without a click); Escalate if it keeps failing."
VIEW_ALERT_CLEARED = ":bell: The alert cleared at {when} UTC, but the fault is still there: {fault}. Open until a probe shows otherwise or a person resolves it."
MSG_THE_ALERT = "The alert: {headline}"

# --- issue 29 h-first: the alert card, posted when the diagnosis starts -----------------
MSG_ALERT_WHAT = "{kind} alert"
MSG_ALERT_ASKED = "{what} by {who}"
MSG_ALERT_FACTS = "Alert `{kind}` ({severity}) fired at {when}{times}"
MSG_ALERT_TIMES = " · {n} times"
MSG_ALERT_LABELS = "Labels: {labels}"
MSG_ALERT_DIAGNOSING = (":hourglass_flowing_sand: Diagnosing… this message is edited with the "
                        "findings as soon as the host's probes answer (or time out).")
MSG_ALERT_NOTIFY = "{mention}{host}: {what}. Diagnosing…"
MSG_ALERT_QUEUED = (":hourglass: Diagnosis queued behind other hosts' diagnoses; this message is "
                    "edited with the findings.")

# --- issue 24 h-faults: an interrupted action read back from the host, never run again ---
FLOW_READ_BACK_DONE = ("{subject} {title} on {host} (read back after the bot was interrupted; "
                       "not run again): {seen}")
FLOW_READ_BACK_FAILED = ("{kind}: interrupted (the bot stopped while it ran); the host shows: "
                         "{seen}; check the host, then Retry")
FLOW_READ_BACK_NONE = "{kind} cannot be read back from the host"
FLOW_READ_BACK_UNREACHABLE = "could not read {host} back: {why}"
FLOW_READ_BACK_UNREADABLE = "could not read the host back: {why}"
FLOW_READ_BACK_NO_GPUS = "the GPUs could not be read"
FLOW_READ_BACK_HELD = "GPU {gpus} still in use"
FLOW_READ_BACK_NOT_DONE = "the action's effect is not there"
FLOW_READ_BACK_NOT_STARTED = "{kind}: interrupted before it ran; check the host, then Retry"
# issue 39: a host that stops answering mid-action, and one that cannot be re-probed first
FLOW_HOST_LOST = ("{kind}: {host} stopped answering while it ran; waiting for it to answer "
                  "to read it back (until {until} UTC)")
FLOW_STATE_UNKNOWN = ("{kind}: {host} stopped answering while it ran and has not answered "
                      "since: its state is unknown. Sent to it before it stopped: {sent}. "
                      "Nothing was run again; check the host, then Retry")
FLOW_READ_BACK_LOST_SHOWS = ("{kind}: {host} stopped answering while it ran (sent to it: "
                             "{sent}); read back once it answered again, it shows: {seen}; "
                             "check the host, then Retry")
FLOW_READ_BACK_AFTER_BOT = "read back after the bot was interrupted"
FLOW_READ_BACK_AFTER_LOST = "read back once {host} answered again"
FLOW_NOT_CHECKED = ("Not running {kind}: {host} could not be checked first ({why}); nothing "
                    "was run. Retry once it answers.")

# --- the ground under the bot (issue 39) ---------------------------------------------------
DATA_LOSS_HEAD = (":warning: *The bot's store (Redis) lost its data* ({how}). Approvals, "
                  "silences, snoozes and the audit from before are gone; buttons on older "
                  "messages no longer act.")
DATA_LOSS_WIPED = "restarted without its data, or a failover to an empty replica"
DATA_LOSS_ROLLED_BACK = "a failover to a replica that was behind: recent changes are missing"
DATA_LOSS_NOTHING = "It held no open incidents at the time: nothing was lost track of."
DATA_LOSS_LOST = "It lost track of {n} open incident{s}:"
DATA_LOSS_LINE = "• {id} · {host} · {kind}: {state}{what}"
DATA_LOSS_RUNNING = " (`{kind}` had been sent to the host, approved by {who}: what it did is read from the host again)"
DATA_LOSS_WAITING = " (its approval buttons no longer act)"
DATA_LOSS_NEW = " → diagnosed again from the host as *{new}*"
DATA_LOSS_UNSHOWN = "These had closed before their message went out (final: nothing to re-open):"
DATA_LOSS_ALSO = (":warning: The same loss of the bot's store (Redis) also took these, which "
                  "had closed before their message went out (final: nothing to re-open):")
DATA_LOSS_UNSHOWN_LINE = "• {id} · {host} · {kind}: {state} before its message went out"
DATA_LOSS_THREAD = ("The bot's store lost {old} ({state}). This incident is *{new}* now, "
                    "diagnosed again from the host; this message is its message.")
