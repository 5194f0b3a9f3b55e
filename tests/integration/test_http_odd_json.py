"""Alert bodies that are valid JSON but odd get a 400 with a reason and change nothing."""

from __future__ import annotations

import pytest
from redis import Redis
from starlette.testclient import TestClient

from bot.core import strings
from bot.ingest.schema import MAX_DEPTH, PayloadError, load_json
from tests.fixtures.alerts import AUTH

ODD: list[tuple[bytes, str]] = [
    (b'{"host": "gpu-01", "kind": "disk_full", "summary": "x\\ud800y"}', "lone surrogate"),
    (b'{"host": "gpu-01", "kind": "disk_full", "details": {"k\\udfff": 1}}', "lone surrogate"),
    (b"[" * 100_000 + b"]" * 100_000, "nested too deeply"),
    (b'{"host": "gpu-01", "kind": "disk_full", "details": ' + b'{"a": ' * 40 + b"1"
     + b"}" * 40 + b"}", "nested too deeply"),
    (b'{"host": "gpu-01", "kind": "disk_full", "details": {"n": 1' + b"0" * 5000 + b"}}",
     "number in the JSON is too long"),
    (b"5", "expected an object"),
    (b'"text"', "expected an object"),
    (b"null", "expected an object"),
    (b"[]", "empty array"),
    (b"[1]", "expected an object"),
]


@pytest.mark.parametrize("path", ["/alerts", "/alerts/alertmanager"])
@pytest.mark.parametrize(("body", "reason"), ODD, ids=[r + str(i) for i, (_, r) in enumerate(ODD)])
def test_odd_json_is_400(alert_client: TestClient, redis: Redis, path: str, body: bytes,
                         reason: str) -> None:
    response = alert_client.post(path, content=body, headers=AUTH)
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    top_level = reason in ("expected an object", "empty array")  # Alertmanager: one object
    assert (reason if path == "/alerts" or not top_level else "expected an object") in error
    assert redis.dbsize() == 0


def test_load_json_limits() -> None:
    ok = b'{"a": ' * (MAX_DEPTH - 1) + b"1" + b"}" * (MAX_DEPTH - 1)
    assert load_json(ok)
    with pytest.raises(PayloadError, match="deeply"):
        load_json(b"[" * (MAX_DEPTH + 1) + b"]" * (MAX_DEPTH + 1))
    with pytest.raises(PayloadError) as exc:
        load_json(b'["\\ud800"]')
    assert str(exc.value) == strings.JSON_BAD_TEXT
    assert load_json(b'["\\ud83d\\ude00"]') == ["\N{GRINNING FACE}"]  # a real pair is fine
