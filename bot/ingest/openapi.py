"""The HTTP contract: an OpenAPI 3.1 document for the alert webhooks, ``/diagnose``, health
and metrics.

Hand-written (not generated from the code) so that it is a promise the code is held to:
``tests/integration/test_openapi.py`` runs Schemathesis against a live server with it,
and ``docs/openapi.json`` is this document, kept equal by a test. Served at
``/openapi.json``. ``/slack/events`` is Slack's contract, not ours, and is left out.
"""

from __future__ import annotations

import copy
from typing import Any

from bot.ingest.alertmanager import MAX_ALERTS as MAX_AM_ALERTS
from bot.ingest.schema import MAX_LABEL_VALUE, MAX_LABELS, MAX_TEXT
from bot.ingest.webhook import MAX_ALERTS, SOURCES
from playbooks import names as playbook_names

JSON = "application/json"
_REF = "#/components/schemas/"


def _ref(name: str) -> dict[str, str]:
    return {"$ref": _REF + name}


def _json(schema: dict[str, Any], description: str) -> dict[str, Any]:
    return {"description": description, "content": {JSON: {"schema": schema}}}


def _error(description: str) -> dict[str, Any]:
    return _json(_ref("Error"), description)


LABELS = {"type": "object", "maxProperties": MAX_LABELS,
          "additionalProperties": {"type": "string", "maxLength": MAX_LABEL_VALUE}}
GENERIC_ALERT = {
    "type": "object", "required": ["host", "kind"], "additionalProperties": False,
    "properties": {
        "host": {"type": "string", "minLength": 1, "maxLength": 253,
                 "description": "an inventory host name (or its address)"},
        "kind": {"type": "string", "minLength": 1, "maxLength": 100,
                 "description": "vm_restart, vram_idle, disk_full, gpu_xid, gpu_ecc, "
                                "gpu_missing; anything else opens a triage incident"},
        "summary": {"type": "string", "maxLength": 500},
        "labels": LABELS,
        "details": {"type": "object"},
        "status": {"enum": ["firing", "resolved"]},
        "severity": {"type": "string", "maxLength": 40},
        "fingerprint": {"type": "string", "maxLength": 200},
        "id": {"type": "string", "maxLength": 200,
               "description": "delivery id: the same id is applied once"},
        "source": {"enum": list(SOURCES)},
    },
}
AM_ALERT = {
    "type": "object", "required": ["labels"],
    "properties": {
        "status": {"enum": ["firing", "resolved"]},
        "labels": {**LABELS, "minProperties": 1},
        "annotations": LABELS,
        "startsAt": {"type": "string", "maxLength": 64},
        "endsAt": {"type": "string", "maxLength": 64},
        "generatorURL": {"type": "string", "maxLength": MAX_TEXT},
        "fingerprint": {"type": "string", "maxLength": 128},
    },
}
AM_NOTIFICATION = {
    "type": "object", "required": ["version", "alerts"],
    "description": "Alertmanager's webhook payload, version 4",
    "properties": {
        "version": {"const": "4"},
        "receiver": {"type": "string", "maxLength": MAX_TEXT},
        "status": {"enum": ["firing", "resolved"]},
        "alerts": {"type": "array", "maxItems": MAX_AM_ALERTS, "items": _ref("AlertmanagerAlert")},
    },
}
INGEST_RESULT = {
    "type": "object", "required": ["accepted", "incidents", "outcomes"],
    "properties": {
        "accepted": {"type": "integer", "minimum": 0},
        "incidents": {"type": "array", "items": {"type": "string"}},
        "outcomes": {"type": "object", "additionalProperties": {"type": "integer", "minimum": 0},
                     "description": "created, grouped, folded, duplicate, silenced, resolved, "
                                    "cleared, unmatched: how many alerts each"},
    },
}
ERROR = {"type": "object", "required": ["error"],
         "properties": {"error": {"type": "string", "description": "the reason, for a person"}}}
HEALTH = {"type": "object", "required": ["status"],
          "properties": {"status": {"enum": ["ok", "unavailable"]}, "redis": {"type": "string"}}}


def _ingest(summary: str, body: dict[str, Any]) -> dict[str, Any]:
    return {"post": {
        "summary": summary, "security": [{"bearer": []}],
        "requestBody": {"required": True, "content": {JSON: {"schema": body}}},
        "responses": {
            "200": _json(_ref("IngestResult"), "the alerts are on disk; what happened to each"),
            "400": _error("the body cannot be used: the reason names the field"),
            "401": _error("missing or wrong bearer token"),
            "408": _error("the body did not arrive within http.body_timeout_s"),
            "413": _error("the body is over http.max_body_bytes (declared or streamed)"),
            "503": _error("Redis cannot take the write now; retry (Retry-After)"),
        }}}


DIAGNOSE_BODY = {
    "type": "object", "required": ["host"], "additionalProperties": False,
    "properties": {
        "host": {"type": "string", "minLength": 1, "maxLength": 253,
                 "description": "an inventory host name: an address is never accepted"},
        "playbook": {"enum": playbook_names(), "default": "auto"},
    },
}
DIAGNOSIS = {
    "type": "object", "required": ["host", "playbook", "status", "findings", "actions"],
    "description": "as `incident-bot diagnose --json` prints it; an unreachable host is a "
                   "200 whose status says so",
    "properties": {
        "host": {"type": "string"}, "playbook": {"type": "string"},
        "status": {"type": "string"}, "duration_s": {"type": "number"},
        "findings": {"type": "array", "items": {"type": "object"}},
        "actions": {"type": "array", "items": {"type": "object"}},
        "probes": {"type": "array", "items": {"type": "object"}},
    },
}
DIAGNOSE = {"post": {
    "summary": "Diagnose an inventory host on serve's warm SSH pool (incident-bot diagnose)",
    "security": [{"diagnose": []}],
    "requestBody": {"required": True, "content": {JSON: {"schema": _ref("DiagnoseRequest")}}},
    "responses": {
        "200": _json(_ref("Diagnosis"), "the diagnosis"),
        "400": _error("not {host, playbook}, or an unknown playbook"),
        "401": _error("missing or wrong bearer token (INCIDENT_BOT_DIAGNOSE_TOKEN, not the "
                      "alert token), or no token configured"),
        "404": _error("the host is not in the inventory"),
        "408": _error("the body did not arrive in time"),
        "413": _error("the body is over 4 KiB"),
        "429": _error("as many diagnoses as allowed already run here; retry (Retry-After)"),
    }}}


def _health(summary: str, ready: bool) -> dict[str, Any]:
    responses = {"200": _json(_ref("Health"), "up")}
    if ready:
        responses["503"] = _json(_ref("Health"), "Redis does not answer")
    return {"get": {"summary": summary, "responses": responses}}


DOCUMENT: dict[str, Any] = {
    "openapi": "3.1.0",
    "info": {"title": "incident-bot", "version": "1",
             "description": "Alert intake, health and metrics of incident-bot's `serve`. "
                            "Text past a documented maxLength is cut, not refused; every "
                            "refusal is a 4xx with {\"error\": reason}."},
    "paths": {
        "/alerts": _ingest("Generic JSON webhook (and the host agent): one alert or an array",
                           {"oneOf": [_ref("Alert"), {"type": "array", "minItems": 1,
                                                      "maxItems": MAX_ALERTS,
                                                      "items": _ref("Alert")}]}),
        "/alerts/alertmanager": _ingest("Alertmanager webhook receiver",
                                        _ref("AlertmanagerNotification")),
        "/diagnose": DIAGNOSE,
        "/healthz": _health("The process answers", ready=False),
        "/readyz": _health("The process can reach Redis", ready=True),
        "/metrics": {"get": {"summary": "Prometheus metrics", "responses": {"200": {
            "description": "Prometheus text format",
            "content": {"text/plain": {"schema": {"type": "string"}}}}}}},
    },
    "components": {
        "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer",
                                       "description": "INCIDENT_BOT_ALERT_TOKEN"},
                            "diagnose": {"type": "http", "scheme": "bearer",
                                         "description": "INCIDENT_BOT_DIAGNOSE_TOKEN"}},
        "schemas": {"Alert": GENERIC_ALERT, "AlertmanagerAlert": AM_ALERT,
                    "AlertmanagerNotification": AM_NOTIFICATION, "IngestResult": INGEST_RESULT,
                    "Error": ERROR, "Health": HEALTH, "DiagnoseRequest": DIAGNOSE_BODY,
                    "Diagnosis": DIAGNOSIS},
    },
}


def document() -> dict[str, Any]:
    """A copy (callers may not change the one the server answers with)."""
    return copy.deepcopy(DOCUMENT)
