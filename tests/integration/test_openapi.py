"""The HTTP contract: ``/openapi.json`` is the hand-written document, ``docs/openapi.json``
is the same, and Schemathesis holds a live server to it (no 5xx, responses match)."""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import SecretStr
from redis import Redis
from schemathesis.checks import not_a_server_error
from schemathesis.core.result import Ok
from schemathesis.specs.openapi.checks import response_schema_conformance
from starlette.routing import Route

from bot.core.procs import free_port
from bot.ingest.diagnose import ROUTE as DIAGNOSE_ROUTE
from bot.ingest.diagnose import DiagnoseEndpoint
from bot.ingest.http import create_app
from bot.ingest.openapi import DOCUMENT, document
from bot.rig.serving import ServedApp
from bot.ssh.pool import ParamikoPool
from storage.stores import Stores
from tests.fixtures.alerts import AUTH, make_settings

DIAG_TOKEN = "test-diagnose-token"
DIAG_AUTH = {"Authorization": f"Bearer {DIAG_TOKEN}"}
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
              tried: dict[str, int], statuses: dict[int, int],
              headers: dict[str, str] = AUTH) -> None:
    """Up to ``EXAMPLES`` cases against ``url``: no 5xx, every answer as documented."""

    @given(case=cases)
    @settings(max_examples=EXAMPLES, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    def call(case: schemathesis.Case) -> None:
        response = case.call_and_validate(
            base_url=url, headers=headers, checks=[not_a_server_error, response_schema_conformance])
        tried[key] = tried.get(key, 0) + 1
        statuses[response.status_code] = statuses.get(response.status_code, 0) + 1

    call()


@pytest.fixture
def live(redis_url: str, redis: Redis) -> Iterator[ServedApp]:
    """The alert app with serve's ``/diagnose`` beside it. Its one inventory host is a
    closed loopback port: a diagnosis runs for real and finds the host unreachable, and
    nothing here can reach another address."""
    settings = make_settings(redis_url, incident_bot_diagnose_token=SecretStr(DIAG_TOKEN),
                             hosts={"gpu-01": {"ssh": f"root@127.0.0.1:{free_port()}"}})
    endpoint = DiagnoseEndpoint(settings, ParamikoPool(settings.ssh_defaults))
    app = create_app(settings, Stores(redis, redis),
                     extra_routes=[Route(DIAGNOSE_ROUTE, endpoint.handle, methods=["POST"])])
    server = ServedApp(app).start()
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
                      "POST /alerts/alertmanager", "POST /diagnose"]


def test_schemathesis_against_a_live_server(live: ServedApp, capsys: pytest.CaptureFixture[str]
                                            ) -> None:
    schema = schemathesis.openapi.from_url(f"{live.url}/openapi.json")
    tried: dict[str, int] = {}
    statuses: dict[int, int] = {}
    for operation, mode in itertools.product(operations_of(schema), schemathesis.GenerationMode):
        if mode is schemathesis.GenerationMode.NEGATIVE and operation.method == "get":
            continue  # a GET here takes no input: nothing to make invalid
        key = f"{operation.label} {mode.value}"
        headers = DIAG_AUTH if operation.path == "/diagnose" else AUTH
        run_cases(operation.as_strategy(mode), live.url, key, tried, statuses, headers)
    with capsys.disabled():
        print(f"\nschemathesis: {sum(tried.values())} requests {tried}, statuses {statuses}")
    assert {k.rsplit(" ", 1)[0] for k in tried} == {
        "GET /healthz", "GET /metrics", "GET /readyz", "POST /alerts", "POST /alerts/alertmanager",
        "POST /diagnose"}
    assert not [s for s in statuses if s >= 500] and 200 in statuses


def test_a_diagnosis_answers_as_documented(live: ServedApp) -> None:
    """The 200 and the refusals Schemathesis rarely draws by chance, held to the document."""
    operation = schemathesis.openapi.from_dict(document())["/diagnose"]["POST"]
    checks = [not_a_server_error, response_schema_conformance]
    cases = [({"host": "gpu-01", "playbook": "triage"}, DIAG_AUTH, 200),
             ({"host": "gpu-01"}, AUTH, 401),  # the alert token does not open it
             ({"host": "10.1.230.174"}, DIAG_AUTH, 404),  # an address is never accepted
             ({"host": "gpu-01", "playbook": "rm"}, DIAG_AUTH, 400)]
    for body, headers, status in cases:
        response = operation.Case(body=body).call_and_validate(
            base_url=live.url, headers=headers, checks=checks)
        assert response.status_code == status, (body, response.text)
    unreachable = operation.Case(body=cases[0][0]).call(base_url=live.url, headers=DIAG_AUTH)
    assert unreachable.json()["status"] != "ok"
