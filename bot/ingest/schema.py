"""Small validators shared by the webhook parsers: every failure names the field."""

from __future__ import annotations

import json
from typing import Any

from bot.core import strings

MAX_LABELS = 64
MAX_LABEL_VALUE = 1024
MAX_TEXT = 2000
MAX_DEPTH = 32  # an alert is a few levels deep; 100,000 levels is an attack, not an alert


class PayloadError(ValueError):
    """A request body we cannot use; the message is returned verbatim with HTTP 400."""


def load_json(body: bytes) -> Any:
    """Parsed JSON that is safe to keep: valid UTF-8 throughout (no lone surrogates from
    ``\\ud800`` escapes, which Redis could not store), at most ``MAX_DEPTH`` deep, numbers
    within Python's int-string limit. Anything else is a PayloadError (400), never a 500."""
    if not body.strip():
        raise PayloadError("empty body: expected JSON")
    try:
        data = json.loads(body)
    except UnicodeDecodeError:
        raise PayloadError("body is not UTF-8 text") from None
    except json.JSONDecodeError as exc:
        where = f"line {exc.lineno} column {exc.colno}"
        raise PayloadError(f"malformed JSON at {where}: {exc.msg}") from None
    except RecursionError:
        raise PayloadError(strings.JSON_TOO_DEEP.format(depth=MAX_DEPTH)) from None
    except ValueError:  # "Exceeds the limit (4300 digits) for integer string conversion"
        raise PayloadError(strings.JSON_BAD_NUMBER) from None
    _check_tree(data)
    return data


def _check_tree(data: Any) -> None:
    """Walk the parsed value once (no recursion): depth, and text that encodes as UTF-8."""
    stack: list[tuple[Any, int]] = [(data, 1)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, str):
            _utf8(value)
        elif isinstance(value, dict | list):
            if depth > MAX_DEPTH:
                raise PayloadError(strings.JSON_TOO_DEEP.format(depth=MAX_DEPTH))
            items = value.items() if isinstance(value, dict) else enumerate(value)
            for key, item in items:
                if isinstance(key, str):
                    _utf8(key)
                stack.append((item, depth + 1))


def _utf8(value: str) -> None:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise PayloadError(strings.JSON_BAD_TEXT) from None


def obj(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise PayloadError(f"{where}: expected an object, got {_type(value)}")
    return value


def text(value: Any, where: str, *, required: bool = False, limit: int = MAX_TEXT) -> str:
    if value is None and not required:
        return ""
    if not isinstance(value, str):
        raise PayloadError(f"{where}: expected a string, got {_type(value)}")
    if required and not value.strip():
        raise PayloadError(f"{where}: must not be empty")
    return value[:limit]


def labels(value: Any, where: str) -> dict[str, str]:
    """A flat string→string map (Prometheus labels); long values are cut, not refused."""
    if value is None:
        return {}
    data = obj(value, where)
    if len(data) > MAX_LABELS:
        raise PayloadError(f"{where}: at most {MAX_LABELS} labels, got {len(data)}")
    out: dict[str, str] = {}
    for key, item in data.items():
        if not isinstance(item, str):
            raise PayloadError(f"{where}.{key}: expected a string, got {_type(item)}")
        out[str(key)[:200]] = item[:MAX_LABEL_VALUE]
    return out


def one_of(value: Any, where: str, allowed: tuple[str, ...], default: str) -> str:
    if value is None:
        return default
    if value not in allowed:
        choices = " or ".join(repr(a) for a in allowed)
        raise PayloadError(f"{where}: must be {choices}, got {_short(value)}")
    return str(value)


def _type(value: Any) -> str:
    return {dict: "an object", list: "an array", str: "a string", bool: "a boolean",
            type(None): "null"}.get(type(value), "a number")


def _short(value: Any) -> str:
    return json.dumps(value)[:60]
