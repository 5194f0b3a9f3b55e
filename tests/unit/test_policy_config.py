"""The policies section: the issue's example loads; a bad policy stops start with the key."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.cli import main
from bot.config.policy import (
    fleet_limits_from_settings,
    maintenance_from_settings,
    policies_from_settings,
)
from bot.config.settings import load_settings
from bot.core.errors import ConfigError
from bot.domain.policy import BlastLimit, PolicyMode

EXAMPLE = """
hosts:
  gpu-01: {ssh: root@127.0.0.1:22}
policies:
  - name: stop-autostarted-inference
    match: {action: systemd.stop_disable, unit: "vllm-*", hosts: "gpu-*",
            kinds: [vm_restart, vram_idle]}
    mode: auto          # auto | shadow | approve (default approve)
    limit: {max_hosts: 3, per: 1h}
    approvers: [S0GPUOPS]
    two_person: false
    window: {not_during: "Mon-Fri 09:00-18:00 Europe/Berlin"}
  - name: reboots-need-two
    match: {action: host.reboot}
    two_person: true
policy_limits: {max_hosts_per_hour: 10, max_fraction: 0.1}
maintenance:
  - {hosts: "gpu-0*", every: "Sat 02:00-04:00 UTC", reason: firmware}
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "config.yaml"
    path.write_text(text)
    return path


def test_the_issue_example_loads_into_policies(tmp_path: Path) -> None:
    settings = load_settings(write(tmp_path, EXAMPLE))
    first, second = policies_from_settings(settings)
    assert first.name == "stop-autostarted-inference" and first.mode is PolicyMode.AUTO
    assert first.limit == BlastLimit(3, 3600.0) and first.approvers == ("S0GPUOPS",)
    assert first.match.unit == "vllm-*" and first.match.kinds == ("vm_restart", "vram_idle")
    assert first.not_during is not None and first.not_during.zone == "Europe/Berlin"
    assert second.mode is PolicyMode.APPROVE and second.two_person and second.limit is None
    limits = fleet_limits_from_settings(settings)
    assert (limits.max_hosts_per_hour, limits.max_fraction) == (10, 0.1)
    assert settings.maintenance[0].every == "Sat 02:00-04:00 UTC"


def test_no_policies_is_todays_behaviour(tmp_path: Path) -> None:
    settings = load_settings(write(tmp_path, "hosts: {}\n"))
    assert policies_from_settings(settings) == () and settings.maintenance == []


BAD = [
    ("mode: sometimes", "policies.0.mode", "auto"),
    ("window: {not_during: 'Mon-Fri 09:00-18:00 Mars/Olympus'}", "policies.0.window.not_during",
     "unknown time zone"),
    ("window: {not_during: 'Someday 09:00-18:00'}", "policies.0.window.not_during", "unknown day"),
    ("limit: {max_hosts: 0}", "policies.0.limit.max_hosts", "greater than or equal to 1"),
    ("limit: {max_hosts: 3, per: a week}", "policies.0.limit.per", "period"),
    ("approvers: [bob]", "policies.0.approvers", "usergroup"),
    ("match: {hosts: 'gpu-01; rm -rf /'}", "policies.0.match.hosts", "not a name glob"),
    ("match: {kinds: ['VM restart']}", "policies.0.match.kinds", "not an incident kind"),
    ("colour: red", "policies.0.colour", "Extra inputs"),
]


@pytest.mark.parametrize(("line", "key", "why"), BAD)
def test_a_bad_policy_names_the_key_and_the_reason(tmp_path: Path, line: str, key: str,
                                                   why: str) -> None:
    text = f"policies:\n  - name: p1\n    {line}\n"
    with pytest.raises(ConfigError) as info:
        load_settings(write(tmp_path, text))
    assert f"key '{key}'" in info.value.message and why in info.value.message


def test_an_action_glob_no_registered_action_matches_stops_the_config(tmp_path: Path) -> None:
    """Checked with the rest of ``config check``'s list (what ``serve`` runs at start): the
    registered kinds include the config's own extensions, which config cannot know."""
    from bot.commands.config import check_config, problems_in

    path = write(tmp_path, "policies:\n  - name: p1\n    match: {action: systemd.stop_dsable}\n")
    settings, lines = check_config(path, alerts_only=True)
    (line,) = [ln for ln in problems_in(lines) if "policies" in ln]
    assert settings is None and "key 'policies.0.match.action'" in line
    assert "'systemd.stop_dsable' matches no catalog action" in line
    good = write(tmp_path, "policies:\n  - name: p1\n    match: {action: 'systemd.*'}\n")
    assert not [ln for ln in problems_in(check_config(good, alerts_only=True)[1])
                if "policies" in ln]


def test_duplicate_names_and_bad_limits_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="two policies are named 'p1'"):
        load_settings(write(tmp_path, "policies: [{name: p1}, {name: p1}]\n"))
    with pytest.raises(ConfigError, match=r"policy_limits\.max_fraction"):
        load_settings(write(tmp_path, "policy_limits: {max_fraction: 1.5}\n"))
    with pytest.raises(ConfigError, match=r"maintenance\.0\.every"):
        load_settings(write(tmp_path, "maintenance: [{every: 'Sat 02:00'}]\n"))


def test_serve_stops_at_start_on_a_bad_policy(tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    """Through the CLI: exit status 2 and the key on the first line, before anything binds
    (the environment's missing Slack secrets follow, one line each)."""
    path = write(tmp_path, "policies:\n  - name: p1\n    mode: yolo\n")
    assert main(["serve", "--config", str(path), "--port", "0"]) == 2
    err = capsys.readouterr().err
    assert "key 'policies.0.mode'" in err.splitlines()[0]
    assert all(line.startswith("error: ") for line in err.splitlines())


def test_maintenance_windows_from_the_config(tmp_path: Path) -> None:
    settings = load_settings(write(tmp_path, EXAMPLE))
    (window,) = maintenance_from_settings(settings)
    assert window.hosts == "gpu-0*" and window.reason == "firmware"
    assert window.window.text == "Sat 02:00-04:00 UTC" and window.kinds == ()


def test_an_auto_policy_that_would_need_two_people_is_refused(tmp_path: Path) -> None:
    """A policy never half-approves a two-person action, so auto there would silently ask."""
    with pytest.raises(ConfigError) as info:
        load_settings(write(tmp_path, "policies: [{name: p1, mode: auto, two_person: true}]\n"))
    assert "key 'policies.0'" in info.value.message and "choose one" in info.value.message
    text = ("approvals: {two_person: [host.reboot]}\n"
            "policies: [{name: p1, match: {action: 'host.*'}, mode: auto}]\n")
    with pytest.raises(ConfigError) as info:
        load_settings(write(tmp_path, text))
    assert "key 'policies'" in info.value.message
    assert "'p1' is mode auto for host.reboot" in info.value.message
    fine = text.replace("mode: auto", "mode: shadow")
    assert load_settings(write(tmp_path, fine)).policies[0].name == "p1"
