"""Two error tiers: UserError is shown verbatim; anything else is logged with an id."""

from __future__ import annotations

import logging
import uuid

log = logging.getLogger(__name__)


class UserError(Exception):
    """A failure whose message is meant for the person who caused it.

    ``exit_code`` is what the CLI exits with (2 for bad input or config, 1 otherwise).
    """

    def __init__(self, message: str, exit_code: int = 1) -> None:
        super().__init__(message)
        self.message = message
        self.exit_code = exit_code


class ConfigError(UserError):
    """A config file or environment that cannot be used; always exit status 2."""

    def __init__(self, message: str) -> None:
        super().__init__(message, exit_code=2)


class ConfigProblems(ConfigError):
    """Every problem found in a config, one line each naming the file and the key (exit
    status 2). ``shown``: the lines were printed already (``config check``)."""

    def __init__(self, lines: list[str], *, shown: bool = False) -> None:
        super().__init__("\n".join(lines))
        self.lines, self.shown = list(lines), shown


class NotBuiltError(UserError):
    """A contracted command that does not exist yet: say so, never pretend."""

    def __init__(self, what: str) -> None:
        super().__init__(f"{what} is not built yet in this version of incident-bot", 3)


def log_internal(exc: BaseException, where: str) -> str:
    """Log an unexpected error with an id a user can quote; return the id."""
    error_id = uuid.uuid4().hex[:12]
    log.error("internal error %s in %s", error_id, where, exc_info=exc)
    return error_id
