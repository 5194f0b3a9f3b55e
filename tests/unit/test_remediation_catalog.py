"""The catalog: typed parameters, refusals, and the exact commands it renders."""

from __future__ import annotations

import shlex

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bot.domain import validate
from bot.remediation import catalog
from bot.remediation.catalog import ActionRefused, parse_params, plan
from bot.ssh.base import SSHTarget

ROOT = SSHTarget(name="gpu-01", host="10.1.230.174")
NONROOT = SSHTarget(name="gpu-01", host="10.1.230.174", user="incident-bot", sudo=True)
UNIT = "vllm-kimi-k25-int4.service"


def test_stop_disable_plans_exactly_stop_then_disable() -> None:
    assert plan("systemd.stop_disable", {"unit": UNIT}, ROOT) == [
        f"systemctl stop {UNIT}",
        f"systemctl disable {UNIT}",
    ]


def test_non_root_target_gets_sudo_n_prefix_once() -> None:
    assert plan("systemd.mask", {"unit": UNIT}, NONROOT) == [
        f"sudo -n systemctl stop {UNIT}",
        f"sudo -n systemctl mask {UNIT}",
    ]


def test_terminate_is_term_then_kill_and_vacuum_is_one_command() -> None:
    assert plan("process.terminate", {"pid": "440"}) == ["env kill -TERM 440", "env kill -KILL 440"]
    assert plan("process.terminate", {"pid": "440"}, NONROOT) == [
        "sudo -n kill -TERM 440",
        "sudo -n kill -KILL 440",
    ]
    assert plan("disk.journal_vacuum", {"size": "500M"}) == ["journalctl --vacuum-size=500M"]


@pytest.mark.parametrize(
    ("file_state", "active", "expected"),
    [
        ("enabled", "active", ["unmask", "enable", "start"]),
        ("disabled", "active", ["unmask", "disable", "start"]),
        ("enabled", "inactive", ["unmask", "enable", "stop"]),
        ("masked", "inactive", ["stop", "mask"]),
        ("masked", "active", ["start", "mask"]),
    ],
)
def test_revert_orders_file_state_and_active_state(
    file_state: str, active: str, expected: list[str]
) -> None:
    commands = plan(
        "systemd.revert", {"unit": UNIT, "unit_file_state": file_state, "active_state": active}
    )
    assert [shlex.split(c)[1] for c in commands] == expected
    assert all(shlex.split(c)[2] == UNIT for c in commands)


@pytest.mark.parametrize(
    ("kind", "params", "reason"),
    [
        (
            "systemd.stop_disable",
            {"unit": "$(touch /tmp/CANARY).service"},
            "not a systemd unit name",
        ),
        ("systemd.stop_disable", {"unit": "x.service; reboot"}, "not a systemd unit name"),
        ("systemd.stop_disable", {"unit": "-.mount"}, "must not start"),
        ("systemd.stop_disable", {"unit": "a.service\nb.service"}, "not a systemd unit name"),
        ("systemd.mask", {"unit": "vllm"}, "not a systemd unit name"),
        ("process.terminate", {"pid": "1"}, "out of range"),
        ("process.terminate", {"pid": "440 441"}, "not a decimal process id"),
        ("process.terminate", {"pid": "-1"}, "not a decimal process id"),
        ("disk.journal_vacuum", {"size": "500M; rm -rf /"}, "expected digits"),
        (
            "systemd.revert",
            {"unit": UNIT, "unit_file_state": "static", "active_state": "active"},
            "must be one of",
        ),
        ("extraction.resume", {"job": "../../etc"}, "expected ex- and 12 hex digits"),
    ],
)
def test_bad_parameters_are_refused_with_the_reason(
    kind: str, params: dict[str, str], reason: str
) -> None:
    with pytest.raises(ActionRefused) as err:
        plan(kind, params)
    assert reason in err.value.message
    assert err.value.exit_code == 2
    assert kind in err.value.message


def test_unknown_kind_missing_and_extra_parameters_are_refused() -> None:
    with pytest.raises(ActionRefused, match=r"unknown action kind 'shell\.run'"):
        plan("shell.run", {"cmd": "id"})
    with pytest.raises(ActionRefused, match="missing parameter 'unit'"):
        plan("systemd.stop_disable", {})
    with pytest.raises(ActionRefused, match="unknown parameter 'now'"):
        plan("systemd.stop_disable", {"unit": UNIT, "now": "yes"})


def test_valid_but_weird_unit_names_are_quoted_as_one_argument() -> None:
    for unit in ("getty@tty1.service", "a:b_c.d-e.service", "dev-disk-by\\x2dlabel-data.mount"):
        for command in plan("systemd.stop_disable", {"unit": unit}, NONROOT):
            argv = shlex.split(command)
            assert argv[:3] == ["sudo", "-n", "systemctl"] and argv[4] == unit and len(argv) == 5


@settings(max_examples=300, deadline=None)
@given(st.text(min_size=1, max_size=80))
def test_any_text_either_is_refused_or_renders_as_exactly_one_argument(text: str) -> None:
    for kind, key in (
        ("systemd.stop_disable", "unit"),
        ("process.terminate", "pid"),
        ("disk.journal_vacuum", "size"),
    ):
        try:
            commands = plan(kind, {key: text}, NONROOT)
        except ActionRefused:
            continue
        for command in commands:
            argv = shlex.split(command)
            assert argv[-1].endswith(text) and len(argv) in (4, 5)


def test_every_accepted_parameter_matches_the_shared_grammar() -> None:
    spec = catalog.get("systemd.stop_disable")
    assert spec.params[0].check is validate.unit_name
    assert catalog.get("process.terminate").params[0].check is validate.pid
    assert catalog.get("disk.journal_vacuum").params[0].check is validate.size


def test_cli_pairs_are_parsed_and_duplicates_refused() -> None:
    assert parse_params(["unit=a.service", "x=y=z"]) == {"unit": "a.service", "x": "y=z"}
    with pytest.raises(ActionRefused, match="key=value"):
        parse_params(["unit"])
    with pytest.raises(ActionRefused, match="given twice"):
        parse_params(["unit=a.service", "unit=b.service"])


def test_extraction_resume_runs_on_the_bot_not_the_host() -> None:
    assert plan("extraction.resume", {"job": "ex-0123456789ab"}) == [
        "(on the bot) resume extraction job ex-0123456789ab"
    ]
    assert catalog.get("extraction.resume").remote is False
