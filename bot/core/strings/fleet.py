"""Strings of the fleet-scale views (issue 37): the storm message, the ranked digest,
the Home tab's fleet summary, a diagnosis asked of a running ``serve``."""

# --- a storm: one message per kind with a live table --------------------------------------
STORM_HEADER = "Storm: {n} {kind} incidents since {since} UTC"
STORM_FALLBACK = "Storm: {n} {kind} incidents in this channel; their table is in this message"
STORM_COUNTS = "*{n} hosts* · {counts}"
STORM_COUNT = "{icon} {n} {state}"
STORM_ROW = "{icon} *{host}* · {state} · {headline}"
STORM_ROW_WAITING = "waiting for its diagnosis"
STORM_SHOWN = "{shown} of {total} shown"
STORM_REST_TITLE = "*Not in the table* ({n}):"
STORM_REST_STATE = "{icon} {state} ({n}): {hosts}"
STORM_REST_MORE = " … and {n} more"
STORM_CONTEXT = ("{shown} · every host's card and evidence is in this thread (in the order they "
                 "came) · `/ir status` lists every open incident · {id}")

# --- hosts ranked by what they need of a person (digest, chart, Home) ---------------------
NEEDS_TITLE = "*Needs a person* · {n} of {total} hosts, most urgent first"
NEEDS_NONE = "No host needs a person: no disk filling, nothing failing, drained or held idle."
NEEDS_LINE = "{rank}. *{host}* · {reasons}"
NEEDS_SHOWN = "_{shown} of {n} shown; {rest}_"
NEEDS_REST_DIGEST = "the chart ranks the same hosts; `/ir status` lists every open incident"
NEEDS_REST_HOME = "`/ir status` and `/ir drained` list the rest; the daily digest ranks them all"
NEED_FULL = "{mount} full in {eta} ({pct} used)"
NEED_FULL_NOW = "{mount} {pct} used"
NEED_FAILING = "{failed} of {n} incidents failed"
NEED_INCIDENTS = "{n} incidents"
NEED_DRAINED = "drained {age}"
NEED_IDLE = "VRAM held idle {gpu_hours}"
NEED_IDLE_NOW = "{n} GPUs holding VRAM idle now"
HOSTS_SHOWN = "{shown} of {total} hosts shown, most in need first"
SHOWN_OF = "({shown} of {total} shown)"

# --- the fleet chart (more hosts than the per-host chart shows) ---------------------------
CHART_FLEET_TITLE = "Fleet of {hosts} hosts — {period} — most in need of a person first"
CHART_FLEET_ROW = "Every host ({hosts}): GPU-hours held idle per hour (bars), hosts with a disk ≥ {pct}% full (line)"
CHART_ROWS_SHOWN = "{shown} of {total} hosts shown"
CHART_HEAT_IDLE = "VRAM held at ~0% utilisation, share of each hour ({cut})"
CHART_HEAT_DISK = "Fullest disk, % used ({cut})"
CHART_WASTE_TITLE = "GPU-hours wasted by {what}{cut}"
TAG_FULL = "full in {eta}"
TAG_FULL_NOW = "{pct} full"
TAG_FAILED = "{n} failed"
TAG_INCIDENTS = "{n} incidents"
TAG_DRAINED = "drained {age}"
TAG_IDLE = "idle {gpu_hours} GPU-h"
TAG_IDLE_NOW = "{n} GPUs idle"
HOME_SUMMARY = ("*{hosts} hosts* · {gpus} GPUs: {busy} busy · {idle} held idle · {free} free · "
                "{broken} broken · *{needs} need a person* · {open} incidents open · "
                "{drained} nodes drained")
HOME_HOSTS = "Hosts"

# --- a diagnosis asked of a running serve (POST /diagnose) ---------------------------------
DIAG_SERVE_NO_TOKEN = "diagnose through serve is off: INCIDENT_BOT_DIAGNOSE_TOKEN is not set on the server"
DIAG_SERVE_UNAUTHORIZED = "missing or wrong token (Authorization: Bearer <INCIDENT_BOT_DIAGNOSE_TOKEN>)"
DIAG_SERVE_BAD_BODY = 'expected {"host": NAME, "playbook": NAME} (a host of the inventory)'
DIAG_SERVE_BUSY = "serve is running as many terminal diagnoses as it allows; try again"
DIAG_SERVE_REFUSED = "serve at {url} refused the diagnosis ({status}): {reason}"
DIAG_SERVE_FALLBACK = "serve at {url} did not answer ({reason}): diagnosing over this machine's own connection"
