"""User-visible strings in one place (slack-bolt style). Sections per area; add, don't inline."""

from __future__ import annotations

# --- general ---------------------------------------------------------------------------
NOT_BUILT = "{what} is not built yet in this version of incident-bot"
INTERNAL_ERROR = "Something went wrong on our side (error id {error_id}). Please quote it when reporting."
