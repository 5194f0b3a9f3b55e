"""Operator extensions on a simulated host over real sshd: the finding in the diagnosis,
the ``ext.*`` action run once, verified and audited like a built-in one, a hostile or
partly matching value refused before any session, a verify that cannot run never called
verified, a revert verified by the effect going away, and ``extensions test``."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.commands.extensions import run_test
from bot.domain.action_result import Seen
from bot.domain.findings import Severity
from bot.remediation import ActionRefused, ActionResult, Outcome, RemediationOptions, execute
from bot.sim.sshd import SimHost
from bot.ssh.pool import ParamikoPool
from playbooks import run_playbook
from storage.audit import AuditLog
from tests.fixtures.remediation import session_commands, tool_calls, unit
from tests.fixtures.sim import SimFactory
from tests.helpers.extensions import EXAMPLES, FABRIC_DOWN, UNIT, installed, write_dir
from tests.helpers.fault_hosts import FAST as FAST_PLAYBOOK

RESTART = "ext.restart_unit"
EVIDENCE = "sha256:" + "cd" * 32


@pytest.fixture
def fabric_down(sim_factory: SimFactory) -> SimHost:
    return sim_factory("healthy", overrides=FABRIC_DOWN)


@pytest.fixture
def example() -> Iterator[None]:
    with installed([EXAMPLES]):
        yield


def _run(pool: ParamikoPool, host: SimHost, kind: str, params: dict[str, str],
         options: RemediationOptions, audit: AuditLog | None = None) -> ActionResult:
    return execute(pool, host.ssh_target(), kind, params, approver="UALICE",
                   evidence_hash=EVIDENCE, audit=audit, options=options, incident_id="INC-9")


def test_the_extension_finding_and_its_proposal_are_in_the_diagnosis(
        fabric_down: SimHost, rem_pool: ParamikoPool, example: None) -> None:
    d = run_playbook(rem_pool, fabric_down.ssh_target(), "triage", options=FAST_PLAYBOOK)
    (found,) = [f for f in d.findings if f.code == "ext.fabricmanager_down"]
    assert found.severity is Severity.CRITICAL and found.title == "nvidia-fabricmanager is failed"
    assert found.evidence["probe"] == "fabric_manager" and found.evidence["stdout"] == "failed"
    assert found.evidence["extension"] == str(EXAMPLES / "fabric_manager.yaml")
    (proposed,) = [a for a in d.actions if a.kind == RESTART]
    assert proposed.params == {"unit": UNIT} and proposed.reason == found.title
    assert "ext.fabric_manager" in [p.name for p in d.probes]
    # a playbook the finding does not list does not run its probe
    other = run_playbook(rem_pool, fabric_down.ssh_target(), "disk_full", options=FAST_PLAYBOOK)
    assert "ext.fabric_manager" not in [p.name for p in other.probes]
    assert not [f for f in other.findings if f.code.startswith("ext.")]


def test_a_probe_that_cannot_run_is_said_could_not_check(
        fabric_down: SimHost, rem_pool: ParamikoPool, tmp_path: Path) -> None:
    d = write_dir(tmp_path / "ext", {"ib.yaml": """
        probes: {ib_ports: {command: "ibstat -p", timeout_s: 5}}
        findings:
          - {code: ext.ib_down, probe: ib_ports, when: {stdout_matches: Down}, severity: warning,
             title: "an InfiniBand port is down"}
        """})
    with installed([d]):
        diagnosis = run_playbook(rem_pool, fabric_down.ssh_target(), "triage",
                                 options=FAST_PLAYBOOK)
    (note,) = [f for f in diagnosis.findings if f.code == "extension.probe_failed"]
    assert note.severity is Severity.INFO and note.title.startswith(
        f"could not check ib_ports (extension {d / 'ib.yaml'}): ")
    assert "not found" in note.title and not [f for f in diagnosis.findings
                                               if f.code == "ext.ib_down"]


def test_the_ext_action_runs_once_is_verified_and_audited(
        fabric_down: SimHost, rem_pool: ParamikoPool, fast_options: RemediationOptions,
        audit_log: AuditLog, example: None) -> None:
    result = _run(rem_pool, fabric_down, RESTART, {"unit": UNIT}, fast_options, audit_log)
    assert result.outcome is Outcome.SUCCEEDED, result.summary
    assert tool_calls(fabric_down, "systemctl", "restart") == [["restart", UNIT]]
    assert unit(fabric_down, UNIT)["active_state"] == "active"
    assert result.verification is not None and result.verification.ok
    assert result.verification.evidence["stdout"] == "active"
    assert result.summary.startswith(f"ran {RESTART} (restart {UNIT}); `systemctl is-active "
                                     f"{UNIT}` printed 'active' (matches ^active$)")
    assert [c.command for c in result.commands] == [f"systemctl restart {UNIT}"]
    actions = [e.action for e in audit_log.timeline("INC-9")]
    assert actions == ["action.started", "action.succeeded"]
    started = audit_log.timeline("INC-9")[0]
    assert started.detail["planned"] == [f"systemctl restart {UNIT}"]
    assert started.evidence_hash == EVIDENCE


@pytest.mark.parametrize("value", ["x.service; rm -rf /", f"{UNIT}.bak", f"{UNIT}\nrm -rf /"])
def test_a_hostile_or_partly_matching_value_is_refused_before_any_session(
        fabric_down: SimHost, rem_pool: ParamikoPool, fast_options: RemediationOptions,
        audit_log: AuditLog, example: None, value: str) -> None:
    with pytest.raises(ActionRefused, match=f"refused {RESTART}: invalid unit"):
        _run(rem_pool, fabric_down, RESTART, {"unit": value}, fast_options, audit_log)
    assert fabric_down.command_log() == []  # not one command, not even a capture
    (refused,) = audit_log.timeline("INC-9")
    assert refused.action == "action.refused" and refused.detail["params"] == {"unit": value}
    assert unit(fabric_down, UNIT)["active_state"] == "failed"


def test_a_verify_command_that_cannot_run_is_never_verified(
        fabric_down: SimHost, rem_pool: ParamikoPool, fast_options: RemediationOptions,
        tmp_path: Path) -> None:
    text = (EXAMPLES / "fabric_manager.yaml").read_text().replace(
        '"systemctl is-active {unit}"', '"fmstatus {unit}"')
    with installed([write_dir(tmp_path / "ext", {"fm.yaml": text})]):
        result = _run(rem_pool, fabric_down, RESTART, {"unit": UNIT}, fast_options)
    assert tool_calls(fabric_down, "systemctl", "restart") == [["restart", UNIT]]  # it ran
    assert not result.outcome.ok and result.verification is not None
    assert not result.verification.ok
    assert result.verification.seen is Seen.COULD_NOT_CHECK  # never a verdict on the effect
    assert result.outcome is Outcome.COULD_NOT_CHECK
    detail = result.verification.detail
    assert detail.startswith(
        f"could not read the host back: ext.verify: `fmstatus {UNIT}` could not run")


def test_a_revert_is_verified_by_the_effect_going_away(
        sim_factory: SimFactory, rem_pool: ParamikoPool, fast_options: RemediationOptions,
        tmp_path: Path) -> None:
    host = sim_factory("healthy", overrides={"commands": {
        "ibportstate mlx5_0": {"stdout": "Active\n"},
        "ibportstate mlx5_0 disable": {"then": {"ibportstate mlx5_0": {"stdout": "Disabled\n"}}},
        "ibportstate mlx5_0 enable": {"then": {"ibportstate mlx5_0": {"stdout": "Active\n"}}}}})
    d = write_dir(tmp_path / "ext", {"port.yaml": """
        actions:
          ext.port_down:
            params: {port: {pattern: 'mlx5_[0-9]+'}}
            run: ["ibportstate {port} disable"]
            verify: {command: "ibportstate {port}", stdout_matches: "^Disabled$", within_s: 5}
            revert: ["ibportstate {port} enable"]
            says: "take {port} down"
        """})
    with installed([d]):
        done = _run(rem_pool, host, "ext.port_down", {"port": "mlx5_0"}, fast_options)
        assert done.outcome is Outcome.SUCCEEDED and done.revert_params == {"port": "mlx5_0"}
        back = _run(rem_pool, host, "ext.port_down.revert", {"port": "mlx5_0"}, fast_options)
    assert back.outcome is Outcome.SUCCEEDED, back.summary
    assert "no longer matches ^Disabled$" in back.summary
    calls = tool_calls(host, "ibportstate")
    assert calls.count(["mlx5_0", "disable"]) == 1 and calls.count(["mlx5_0", "enable"]) == 1
    assert host.state()["commands"]["ibportstate mlx5_0"]["stdout"] == "Active\n"


def test_extensions_test_shows_what_a_host_would_raise(fabric_down: SimHost,
                                                       tmp_path: Path) -> None:
    config = tmp_path / "bot.yaml"
    sim = fabric_down
    config.write_text(f"hosts:\n  gpu-01: {{ssh: '{sim.target}', key: '{sim.key_path}', "
                      f"known_hosts: '{sim.known_hosts_path}'}}\n")
    lines = run_test(EXAMPLES, "gpu-01", playbook=None, config=config, ssh_key=None,
                     known_hosts=None)
    assert lines[0] == "gpu-01: 1 extension probes run, 1 findings (every playbook)"
    assert lines[1].startswith("probe ext.fabric_manager: exit 3,")
    assert lines[1].endswith("'failed'")
    assert lines[2:] == ["critical ext.fabricmanager_down: nvidia-fabricmanager is failed",
                         f"  proposes {RESTART} unit={UNIT}"]
    assert session_commands(fabric_down) == [
        f"timeout -k 2 5 sh -c 'systemctl is-active {UNIT}'"]  # read only: nothing changed
