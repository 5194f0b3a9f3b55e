"""Identifier grammar for anything that may reach a remote command line.

Unit names, PIDs, paths and sizes come from hosts that may be compromised. Only values
that match these grammars become action parameters; everything else is evidence.
Validators return the canonical value or raise ``InvalidIdentifier`` with a reason.
"""

from __future__ import annotations

import posixpath
import re
import uuid
from collections.abc import Callable, Iterable, Mapping

UNIT_TYPES = ("service", "socket", "target", "device", "mount", "automount", "swap",
              "timer", "path", "slice", "scope")
UNIT_NAME_MAX = 255
# systemd's unit-name alphabet (unit-name.c VALID_CHARS plus '@' for templates).
_UNIT = re.compile(
    r"^(?P<prefix>[A-Za-z0-9:_.\\-]+)(?:@(?P<instance>[A-Za-z0-9:_.\\-]*))?"
    r"\.(?P<type>" + "|".join(UNIT_TYPES) + r")$"
)
_PID = re.compile(r"^[1-9][0-9]{0,6}$")
PID_MAX = 4_194_304  # the kernel's PID_MAX_LIMIT on 64-bit
_PATH_CHAR = re.compile(r"^[A-Za-z0-9._@+=:,%/-]+$")
_SIZE = re.compile(r"^([1-9][0-9]{0,5})([KMGT])$")
_CONTAINER = re.compile(r"^[a-f0-9]{12,64}$")
DEFAULT_PREFIXES = ("/data", "/shared", "/var")

# One host grammar for inventory names, alert hosts, job hosts and sample hosts: they end
# up in Redis keys, SSH targets and chat text. Names, IPv4, and IPv6 without brackets.
HOST_CHARS = "A-Za-z0-9._:-"
HOST_RE = re.compile(rf"^[A-Za-z0-9][{HOST_CHARS}]{{0,252}}$")
# One job-id grammar: what ``new_job_id`` makes and every job argument must match.
JOB_ID_RE = re.compile(r"^ex-[0-9a-f]{12}$")
# A Slack user-group id (``S`` + upper-case alphanumerics), as mentions and config carry it.
USERGROUP_RE = re.compile(r"^S[A-Z0-9]{2,20}$")
# Incident ids are the store's sequence numbers; chat values and slash arguments use this.
INCIDENT_ID = r"[A-Za-z0-9_-]{1,64}"
INCIDENT_ID_RE = re.compile(rf"^{INCIDENT_ID}$")
# A Slurm node name (slurm.conf NodeName): a host name, no ranges or lists (``gpu-[01-04]``).
SLURM_NODE_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
# A drain reason's own words: plain text that cannot fake Slurm's ``[user@time]`` suffix nor,
# split at its spaces, add a ``Key=value`` of its own to ``scontrol update`` (no ``=``).
SLURM_REASON_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9 .,:;()_/+-]{0,159}$")
# A Slurm job id: digits, or an array task ``123_4`` (never a list, a range or a name).
SLURM_JOB_RE = re.compile(r"^[1-9][0-9]{0,9}(?:_[0-9]{1,7})?$")


def valid_host(host: str) -> bool:
    return bool(HOST_RE.match(host))


def new_job_id() -> str:
    return f"ex-{uuid.uuid4().hex[:12]}"


def valid_job_id(job_id: str) -> bool:
    return bool(JOB_ID_RE.match(job_id))


class InvalidIdentifier(ValueError):
    """A value that must not become a remote argument; ``reason`` says why."""

    def __init__(self, kind: str, value: object, reason: str) -> None:
        self.kind = kind
        self.value = value
        self.reason = reason
        super().__init__(f"invalid {kind} {_shown(value)}: {reason}")


def _shown(value: object) -> str:
    """Repr, cut short: hostile values may be long."""
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def unit_name(value: object) -> str:
    """A systemd unit name such as ``vllm-kimi-k25-int4.service`` or ``getty@tty1.service``."""
    if not isinstance(value, str):
        raise InvalidIdentifier("unit", value, "not a string")
    if not value or len(value) > UNIT_NAME_MAX:
        raise InvalidIdentifier("unit", value, f"length must be 1..{UNIT_NAME_MAX}")
    if value[0] in "-.":
        raise InvalidIdentifier("unit", value, "must not start with '-' or '.'")
    m = _UNIT.fullmatch(value)
    if not m:
        raise InvalidIdentifier("unit", value,
                                "not a systemd unit name (name.type, [A-Za-z0-9:_.\\-@])")
    if m["instance"] == "":
        raise InvalidIdentifier("unit", value, "a template, not a unit that can run")
    return value


def pid(value: object) -> str:
    """A decimal PID above 1 (init is never a target), as text."""
    text = str(value) if isinstance(value, int) and not isinstance(value, bool) else value
    if not isinstance(text, str) or not _PID.fullmatch(text):
        raise InvalidIdentifier("pid", value, "not a decimal process id")
    if not 1 < int(text) <= PID_MAX:
        raise InvalidIdentifier("pid", value, f"out of range 2..{PID_MAX}")
    return text


def abs_path(value: object) -> str:
    """An absolute, normalised path of safe characters (``/`` itself included)."""
    if value == "/":
        return "/"
    if not isinstance(value, str):
        raise InvalidIdentifier("path", value, "not a string")
    if not value.startswith("/") or len(value) > 4096:
        raise InvalidIdentifier("path", value, "must be absolute and at most 4096 bytes")
    if not _PATH_CHAR.fullmatch(value):
        raise InvalidIdentifier("path", value, "contains characters outside [A-Za-z0-9._@+=:,%/-]")
    if posixpath.normpath(value) != value.rstrip("/") or "//" in value:
        raise InvalidIdentifier("path", value, "not normalised ('.', '..' or '//')")
    clean = value.rstrip("/")
    if any(part.startswith("-") for part in clean.split("/")):
        raise InvalidIdentifier("path", value, "a component starts with '-'")
    return clean


def path_under(value: object, prefixes: Iterable[str] = DEFAULT_PREFIXES) -> str:
    """An absolute, normalised path strictly under one of ``prefixes`` (component-wise)."""
    clean = abs_path(value)
    for prefix in prefixes:
        base = prefix.rstrip("/")
        if base and clean.startswith(base + "/"):
            return clean
    raise InvalidIdentifier("path", value, f"not under {', '.join(prefixes) or '(no prefixes)'}")


def size(value: object) -> str:
    """A journald-style size: digits and one of K, M, G, T (``500M``)."""
    if not isinstance(value, str) or not _SIZE.fullmatch(value):
        raise InvalidIdentifier("size", value, "expected digits and K/M/G/T, e.g. 500M")
    return value


def container_id(value: object) -> str:
    """A docker container id (12..64 lowercase hex)."""
    if not isinstance(value, str) or not _CONTAINER.fullmatch(value):
        raise InvalidIdentifier("container", value, "not a hex container id")
    return value


def slurm_node(value: object) -> str:
    """One Slurm node name, as ``scontrol update NodeName=`` takes it (never a list)."""
    if not isinstance(value, str) or not SLURM_NODE_RE.fullmatch(value):
        raise InvalidIdentifier("slurm node", value,
                                "expected one node name: [A-Za-z0-9._-], at most 64")
    return value


def slurm_reason(value: object) -> str:
    """A drain reason's text (the bot adds ``incident-bot INC-7: `` in front): one line of
    letters, digits, spaces and ``.,:;()_/+-``, at most 160 characters."""
    if not isinstance(value, str) or not SLURM_REASON_RE.fullmatch(value) or value != value.strip():
        raise InvalidIdentifier("reason", value, "expected one line of plain text "
                                "([A-Za-z0-9 .,:;()_/+-], at most 160, no = [ ] or quotes)")
    return value


def slurm_job(value: object) -> str:
    """One Slurm job id (``4242`` or an array task ``4242_7``)."""
    text = str(value) if isinstance(value, int) and not isinstance(value, bool) else value
    if not isinstance(text, str) or not SLURM_JOB_RE.fullmatch(text):
        raise InvalidIdentifier("slurm job", value, "expected a job id such as 4242 or 4242_7")
    return text


def incident_ref(value: object) -> str:
    """An incident id as an action parameter ("" when the action has no incident)."""
    if value == "":
        return ""
    if not isinstance(value, str) or not INCIDENT_ID_RE.fullmatch(value):
        raise InvalidIdentifier("incident", value, "expected an incident id such as INC-7")
    return value


def is_valid(check: Callable[[object], str], value: object) -> bool:
    try:
        check(value)
    except InvalidIdentifier:
        return False
    return True


# Parameter name -> validator, for action params (``{"unit": ...}``, ``{"pid": ...}``).
PARAM_CHECKS: dict[str, Callable[[object], str]] = {
    "unit": unit_name, "pid": pid, "size": size, "container": container_id,
}


def params(values: Mapping[str, object], *,
           path_prefixes: Iterable[str] = DEFAULT_PREFIXES) -> dict[str, str]:
    """Validate every action parameter by its name; unknown names are refused."""
    out: dict[str, str] = {}
    prefixes = tuple(path_prefixes)
    for key, value in values.items():
        if key == "path":
            out[key] = path_under(value, prefixes)
        elif key in PARAM_CHECKS:
            out[key] = PARAM_CHECKS[key](value)
        else:
            raise InvalidIdentifier("parameter", key, "unknown parameter name")
    return out
