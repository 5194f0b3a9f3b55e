"""The HTTP contract: ``/openapi.json`` is the hand-written document, ``docs/openapi.json``
is the same, and Schemathesis holds a live server to it (no 5xx, responses match)."""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from schemathesis.checks import not_a_server_error
from schemathesis.core.result import Ok
from schemathesis.specs.openapi.checks import response_schema_conformance
from starlette.applications import Starlette

from bot.ingest.openapi import DOCUMENT, document
from bot.rig.serving import ServedApp
from tests.fixtures.alerts import AUTH

DOCS = Path(__file__).resolve().parents[2] / "docs" / "openapi.json"
EXAMPLES = 30  # per operation and mode: the whole run stays well under a minute here


def operations_of(schema: schemathesis.BaseSchema) -> list[schemathesis.APIOperation]:
    out = []
    for result in schema.get_all_operations():
        operation = result.ok() if isinstance(result, Ok) else None
        assert operation is not None, result
        out.append(operation)
    return out


def run_cases(cases: st.SearchStrategy[schemathesis.Case], url: str, key: str,
              tried: dict[str, int], statuses: dict[int, int]) -> None:
    """Up to ``EXAMPLES`` cases against ``url``: no 5xx, every answer as documented."""

    @given(case=cases)
    @settings(max_examples=EXAMPLES, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    def call(case: schemathesis.Case) -> None:
        response = case.call_and_validate(
            base_url=url, headers=AUTH, checks=[not_a_server_error, response_schema_conformance])
        tried[key] = tried.get(key, 0) + 1
        statuses[response.status_code] = statuses.get(response.status_code, 0) + 1

    call()


@pytest.fixture
def live(make_alert_app: Callable[..., Starlette]) -> Iterator[ServedApp]:
    server = ServedApp(make_alert_app()).start()
    yield server
    server.stop()


def test_docs_copy_is_the_served_document(live: ServedApp) -> None:
    assert json.loads(DOCS.read_text()) == DOCUMENT, (
        "regenerate: python -c 'import json; from bot.ingest.openapi import DOCUMENT; "
        "print(json.dumps(DOCUMENT, indent=2, ensure_ascii=False))' > docs/openapi.json")
    assert httpx.get(f"{live.url}/openapi.json").json() == DOCUMENT
    served = document()
    served["paths"].clear()
    assert DOCUMENT["paths"], "document() hands out a copy"


def test_document_is_valid_openapi_3_1() -> None:
    schema = schemathesis.openapi.from_dict(document())
    assert DOCUMENT["openapi"] == "3.1.0"
    labels = sorted(op.label for op in operations_of(schema))
    assert labels == ["GET /healthz", "GET /metrics", "GET /readyz", "POST /alerts",
                      "POST /alerts/alertmanager"]


def test_schemathesis_against_a_live_server(live: ServedApp, capsys: pytest.CaptureFixture[str]
                                            ) -> None:
    schema = schemathesis.openapi.from_url(f"{live.url}/openapi.json")
    tried: dict[str, int] = {}
    statuses: dict[int, int] = {}
    for operation, mode in itertools.product(operations_of(schema), schemathesis.GenerationMode):
        if mode is schemathesis.GenerationMode.NEGATIVE and operation.method == "get":
            continue  # a GET here takes no input: nothing to make invalid
        key = f"{operation.label} {mode.value}"
        run_cases(operation.as_strategy(mode), live.url, key, tried, statuses)
    with capsys.disabled():
        print(f"\nschemathesis: {sum(tried.values())} requests {tried}, statuses {statuses}")
    assert {k.rsplit(" ", 1)[0] for k in tried} == {
        "GET /healthz", "GET /metrics", "GET /readyz", "POST /alerts", "POST /alerts/alertmanager"}
    assert not [s for s in statuses if s >= 500] and 200 in statuses
