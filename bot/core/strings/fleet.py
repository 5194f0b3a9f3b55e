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
