"""The dcgm-exporter rules agree with the Xid policy and route to gpu_health
(promtool itself runs them in tests/integration/test_alertmanager_real.py)."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from bot.domain.kinds import playbook_for
from bot.domain.xid import DEFAULT_POLICY
from bot.ingest.mapping import DEFAULT_KINDS, Mapper

RULES = Path(__file__).resolve().parents[2] / "deploy/prometheus/gpu-health-rules.yml"


def rules() -> list[dict[str, object]]:
    return [r for g in yaml.safe_load(RULES.read_text())["groups"] for r in g["rules"]]


def test_critical_xids_match_the_default_policy() -> None:
    xid_rule = next(r for r in rules() if r["alert"] == "GpuXidCritical")
    listed = sorted(int(x) for x in re.findall(r"DCGM_FI_DEV_XID_ERRORS == (\d+)",
                                               str(xid_rule["expr"])))
    assert listed == DEFAULT_POLICY.critical_gpu_xids()


def test_every_rule_routes_to_the_gpu_health_playbook() -> None:
    mapper = Mapper()
    for rule in rules():
        labels = rule["labels"]
        assert isinstance(labels, dict)
        kind = DEFAULT_KINDS[str(rule["alert"])]
        assert labels["incident_kind"] == kind
        assert mapper.kind(str(rule["alert"]), {}) == kind
        assert mapper.kind("renamed", {"incident_kind": kind}) == kind
        assert playbook_for(kind) == "gpu_health"
