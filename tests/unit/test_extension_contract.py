"""Operator extensions (issue 34): the YAML contract, what a bad file says (file, key,
reason), the value grammar an ``ext.*`` action holds its parameters to, and the actions
registered beside the built-in ones."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

from bot.domain import extension as E
from bot.domain.validate import InvalidIdentifier
from bot.extensions import load
from bot.remediation import actions, catalog
from bot.remediation.actions import registry
from bot.remediation.actions.operator import OperatorAction, OperatorRevert
from bot.remediation.spec import ActionRefused
from playbooks import probe_registry
from tests.helpers.extensions import EXAMPLES, UNIT, installed, loaded, write_dir

RESTART = "ext.restart_unit"


def test_the_issues_contract_loads_as_written() -> None:
    ext = loaded([EXAMPLES])
    (finding,) = ext.findings
    assert finding.code == "ext.fabricmanager_down" and finding.severity == "critical"
    assert finding.playbooks == {"vm_restart", "gpu_health", "triage"}  # gpu_xid: its playbook
    assert finding.propose == (RESTART, {"unit": UNIT})
    assert ext.probes["fabric_manager"].command == f"systemctl is-active {UNIT}"
    action = ext.actions[RESTART]
    assert action.run == (("systemctl", "restart", "{unit}"),) and action.revert is None
    assert action.verify.within_s == 15 and action.said({"unit": UNIT}) == f"restart {UNIT}"
    assert finding.matches("failed\n") and finding.matches("inactive") \
        and not finding.matches("active\n")
    assert finding.title_for("failed\n") == "nvidia-fabricmanager is failed"


GOOD_ACTION = """
actions:
  ext.a:
    params: {unit: {pattern: '^[a-z]+\\.service$'}}
    run: ["systemctl restart {unit}"]
    verify: {command: "systemctl is-active {unit}", stdout_matches: "^active$", within_s: 5}
    says: "restart {unit}"
"""

BAD = [
    ("findings: [{code: fm_down, probe: p, when: {stdout_matches: x}, severity: info, "
     "title: t}]\nprobes: {p: {command: 'true'}}",
     "findings.0.code", "must start with 'ext.'"),
    ("actions: {systemd.stop_disable: {run: [x], verify: {command: x, stdout_matches: x, "
     "within_s: 1}, says: x}}", "actions.systemd.stop_disable", "must start with 'ext.'"),
    ("findings: [{code: ext.x, probe: nope, when: {stdout_matches: x}, severity: info, "
     "title: t}]", "findings.0.probe", "no probe named 'nope'"),
    ("probes: {p: {command: 'true'}}\nfindings: [{code: ext.x, probe: p, when: "
     "{stdout_matches: '('}, severity: info, title: t}]",
     "findings.0.when.stdout_matches", "not a regular expression"),
    ("probes: {p: {command: 'true'}}\nfindings: [{code: ext.x, probe: p, when: "
     "{stdout_matches: x}, severity: fatal, title: t}]", "findings.0.severity", "critical"),
    ("probes: {p: {command: 'true'}}\nfindings: [{code: ext.x, probe: p, when: "
     "{stdout_matches: x}, severity: info, title: t, playbooks: [nope]}]",
     "findings.0.playbooks.0", "not a playbook or an alert kind"),
    ("probes: {p: {command: 'true'}}\nfindings: [{code: ext.x, probe: p, when: "
     "{stdout_matches: x}, severity: info, title: '{unit} is down'}]",
     "findings.0.title", "may use only {stdout}"),
    ("probes: {uptime: {command: 'uptime'}}", "probes.uptime", "already defined by a built-in"),
    ("probes: {'Bad Name': {command: 'true'}}", "probes.Bad Name", "is not a name"),
    (GOOD_ACTION.replace("systemctl restart {unit}", "systemctl restart {unit} | tee /x"),
     "actions.ext.a.run.0", "one program and its arguments"),
    (GOOD_ACTION.replace("systemctl restart {unit}", "systemctl restart {unti}"),
     "actions.ext.a.run.0", "{unti} is not a parameter"),
    (GOOD_ACTION.replace("systemctl restart {unit}", "{unit} restart"),
     "actions.ext.a.run.0", "the program (the first word) cannot be a parameter"),
    (GOOD_ACTION.replace("systemctl restart {unit}", "systemctl restart {unit!r}"),
     "actions.ext.a.run.0", "is not a parameter"),
    (GOOD_ACTION.replace('says: "restart {unit}"', 'says: "restart {name}"'),
     "actions.ext.a.says", "{name} is not a parameter"),
    (GOOD_ACTION.replace("within_s: 5", "within_s: 6000"), "actions.ext.a.verify.within_s",
     "less than or equal to 600"),
    (GOOD_ACTION + "findings: [{code: ext.x, probe: uptime, when: {stdout_matches: x}, "
     "severity: info, title: t, propose: {action: ext.a, params: {unit: 'x.service; rm'}}}]",
     "findings.0.propose.params", "does not match"),
    (GOOD_ACTION + "findings: [{code: ext.x, probe: uptime, when: {stdout_matches: x}, "
     "severity: info, title: t, propose: {action: ext.nope}}]",
     "findings.0.propose.action", "no action kind 'ext.nope'"),
    (GOOD_ACTION.replace("says:", "revert: ['true']\n    says:") + "  ext.a.revert:\n"
     "    run: ['true']\n    verify: {command: 'true', stdout_matches: x, within_s: 1}\n"
     "    says: x\n", "actions.ext.a.revert", "already defined"),
    ("probes:\n" + "".join(f"  p{i}: {{command: 'true'}}\n" for i in range(33)), "probes",
     "at most 32"),
    (f"probes: {{p: {{command: '{'x' * 1001}'}}}}", "probes.p.command", "longer than 1000"),
    ("- just a list", "(top level)", "must be a mapping"),
    ("probes: [", "(file)", "not valid YAML"),
    ("!!python/object/apply:os.system ['touch /tmp/ib-ext-pwned']", "(file)", "not valid YAML"),
    ("colour: red", "colour", "Extra inputs"),
]


@pytest.mark.parametrize(("body", "key", "why"), BAD)
def test_a_bad_file_names_the_file_the_key_and_the_reason(tmp_path: Path, body: str, key: str,
                                                          why: str) -> None:
    d = write_dir(tmp_path / "ext", {"bad.yaml": body})
    _, problems = load([str(d)])
    lines = [p.line() for p in problems]
    assert any(line.startswith(f"{d / 'bad.yaml'}: key '{key}': ") and why in line
               for line in lines), lines
    assert not Path("/tmp/ib-ext-pwned").exists()  # safe_load: no object is ever built


def test_names_are_defined_once_across_files_and_directories(tmp_path: Path) -> None:
    one = write_dir(tmp_path / "one", {"a.yaml": GOOD_ACTION + "probes: {p: {command: 'true'}}"})
    two = write_dir(tmp_path / "two", {"b.yaml": GOOD_ACTION + "probes: {p: {command: 'x'}}"})
    _, problems = load([str(one), str(two)])
    lines = sorted(p.line() for p in problems)
    assert lines == [f"{two / 'b.yaml'}: key 'actions.ext.a': kind 'ext.a' is already defined "
                     f"by {one / 'a.yaml'}",
                     f"{two / 'b.yaml'}: key 'probes.p': probe 'p' is already defined by "
                     f"{one / 'a.yaml'}"]


def test_config_check_reads_the_extension_directories(tmp_path: Path) -> None:
    """``config check`` (and so ``serve`` at start) reads them through ``add_checker``."""
    from bot.commands.config import CHECKERS, check_config, extension_dirs, problems_in

    assert extension_dirs in CHECKERS
    bad = write_dir(tmp_path / "ext", {"fm.yaml": "findings: [{code: fm}]\n"})
    config = tmp_path / "bot.yaml"
    config.write_text(f"extensions: [{bad}, {tmp_path / 'gone'}]\n")
    settings, lines = check_config(config, alerts_only=True)
    problems = problems_in(lines)
    assert settings is None
    assert any(p.startswith(f"{bad / 'fm.yaml'}: key 'findings.0.code': code 'fm' must start")
               for p in problems), problems
    assert f"{config}: key 'extensions.1': {tmp_path / 'gone'}: no such directory, or not " \
           "readable by this user" in problems
    config.write_text(f"extensions: [{EXAMPLES}]\n")
    assert check_config(config, alerts_only=True)[0] is not None


def test_a_missing_directory_is_named_by_its_config_key(tmp_path: Path) -> None:
    _, problems = load([str(tmp_path / "nowhere")], where="bot.yaml")
    assert [p.line() for p in problems] == [
        f"bot.yaml: key 'extensions.0': {tmp_path / 'nowhere'}: no such directory, or not "
        "readable by this user"]


def test_a_file_over_the_size_bound_is_refused_unread(tmp_path: Path) -> None:
    d = write_dir(tmp_path / "ext", {"big.yaml": "# " + "x" * E.LIMITS.file_bytes})
    _, problems = load([str(d)])
    assert [p.key for p in problems] == ["(file)"] and "larger than" in problems[0].reason


PATTERN = E.ParamDef("unit", r"^[A-Za-z0-9@._-]+\.service$", "")


@pytest.mark.parametrize("value", [
    "x.service; rm -rf /", "$(reboot).service", "nvidia-fabricmanager.service.bak",
    "a.service\nb.service", "-x.service", "x" * 300 + ".service", "", "x.service ",
])
def test_a_value_must_match_its_pattern_in_full(value: str) -> None:
    with pytest.raises(InvalidIdentifier):
        PATTERN.check(value)


def test_every_value_is_quoted_when_the_command_is_made(tmp_path: Path) -> None:
    d = write_dir(tmp_path / "ext", {"echo.yaml": """
        actions:
          ext.say:
            params: {words: {pattern: '[a-z ;]+'}}
            run: ["logger -t incident-bot {words}"]
            verify: {command: "true", stdout_matches: "", within_s: 1}
            says: "log {words}"
        """})
    with installed([d]):
        (command,) = catalog.plan("ext.say", {"words": "hello; rm x"})
    assert command == "logger -t incident-bot 'hello; rm x'"
    assert shlex.split(command)[-1] == "hello; rm x"  # one argument, never a second command


def test_an_ext_action_is_a_registered_action_and_refuses_a_hostile_value() -> None:
    with installed([EXAMPLES]):
        action = actions.get(RESTART)
        assert isinstance(action, OperatorAction) and RESTART in actions.kinds()
        assert catalog.plan(RESTART, {"unit": UNIT}) == [f"systemctl restart {UNIT}"]
        with pytest.raises(ActionRefused) as info:
            catalog.plan(RESTART, {"unit": "x.service; rm -rf /"})
        assert info.value.message.startswith(f"refused {RESTART}: invalid unit "
                                             "'x.service; rm -rf /': does not match")
        with pytest.raises(ActionRefused, match="unknown parameter 'host'"):
            catalog.plan(RESTART, {"unit": UNIT, "host": "x"})
        assert action.phrase({"unit": UNIT}) == f"restart {UNIT}" and not action.revertable
        assert action.proposal({"unit": "-rf"}, "why") is None
    assert actions.find(RESTART) is None  # taken away with the extensions


def test_a_revert_is_its_own_kind_with_the_same_parameters(tmp_path: Path) -> None:
    d = write_dir(tmp_path / "ext", {"port.yaml": """
        actions:
          ext.port_down:
            params: {port: {pattern: 'mlx5_[0-9]'}}
            run: ["ibportstate {port} disable"]
            verify: {command: "ibportstate {port}", stdout_matches: "Disabled", within_s: 5}
            revert: ["ibportstate {port} enable"]
            says: "take {port} down"
        """})
    with installed([d]):
        forward, back = actions.get("ext.port_down"), actions.get("ext.port_down.revert")
        assert forward.revertable and forward.revert_kind == back.kind
        assert isinstance(back, OperatorRevert) and back.undoes
        assert catalog.plan(back.kind, {"port": "mlx5_0"}) == ["ibportstate mlx5_0 enable"]


def test_an_extension_never_replaces_a_registered_kind() -> None:
    taken = type("Shadow", (OperatorAction,), {"kind": "systemd.stop_disable"})
    with pytest.raises(registry.BadAction, match="registered already"):
        registry.register([taken])
    assert type(actions.get("systemd.stop_disable")).__name__ == "StopDisable"


def test_the_built_in_probes_are_registered_by_name() -> None:
    assert "uptime" in probe_registry.names() and "failed_units" in probe_registry.names()
    assert probe_registry.get("uptime").command == "uptime"
    with pytest.raises(probe_registry.UnknownProbe):
        probe_registry.get("nope")
