"""`incident-bot config check`: a broken file of each kind is named, file and key, one line
per problem; `serve` (full and --alerts-only) and `policy check` stop on the same lines;
`--probe` logs in to a real sshd (a simulated host) and names one it cannot reach."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from bot.cli import main
from bot.commands import config as config_cmd
from bot.sim.sshd import SimHost
from tests.fixtures.sim import SimFactory

SECRETS = {"SLACK_BOT_TOKEN": "xoxb-test", "SLACK_SIGNING_SECRET": "s3cret",
           "INCIDENT_BOT_ALERT_TOKEN": "alert-token"}


@pytest.fixture(autouse=True)
def environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value)
    for name in ("SLACK_APP_TOKEN", "REDIS_URL", "PD_ROUTING_KEY"):
        monkeypatch.delenv(name, raising=False)


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "config.yaml"
    path.write_text(textwrap.dedent(text))
    return path


def check(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, list[str], str]:
    rc = main(["config", "check", *args])
    out = capsys.readouterr()
    return rc, out.err.splitlines(), out.out


# (a broken file, the key its one line names, words of the reason)
BROKEN = [
    ("hosts: {gpu-01: {ssh: 'root@10.0.0.1:99999'}}\n", "hosts.gpu-01.ssh",
     "port 99999 out of range 1..65535"),
    ("http: {port: seventy}\n", "http.port", "valid integer"),
    ("slack: {chanel: C1}\n", "slack.chanel", "Extra inputs are not permitted"),
    ("slack_bot_token: xoxb-in-the-file\n", "slack_bot_token", "only from the environment"),
    ("extra: {digest: {schedules: [{cron: '61 * * * *', channel: C1}]}}\n",
     "extra.digest.schedules.0.cron", "bad crontab"),
    ("extra: {scheduler: {jobs: {progress: {cron: 'every day'}}}}\n",
     "extra.scheduler.jobs.progress.cron", "bad crontab"),
    ("extra: {remediation: {settle_s: -1}}\n", "extra.remediation.settle_s", "greater than"),
    ("extra: {reconcile: {max_attempts: 0}}\n", "extra.reconcile.max_attempts", "greater"),
    ("extra: {sheduler: {}}\n", "extra", "unknown section 'sheduler'"),
    ("policies: [{name: p, match: {action: systemd.stop_disable}, mode: auto,"
     " limit: {max_hosts: 3, per: fortnightly}}]\n", "policies.0.limit.per", "not a period"),
    ("policies: [{name: p, mode: auto, not_during: 'Someday 09:00-18:00'}]\n",
     "policies.0.not_during", ""),
    ("maintenance: [{hosts: 'gpu-*', every: 'Sat 02:00'}]\n", "maintenance.0.every", ""),
    ("runbooks: {'GPU XID': 'https://wiki.example'}\n", "runbooks", "is not a finding code"),
    ("alerts: {kinds: {GpuOnFire: 'Not A Kind'}}\n", "alerts.kinds", "invalid kind name"),
    ("chat_backend: carrier-pigeon\n", "chat_backend", "unknown backend"),
    ("paging: {pagerduty: {routing_key_env: PD_ROUTING_KEY}}\n",
     "paging.pagerduty.routing_key_env", "PD_ROUTING_KEY is not set"),
]


@pytest.mark.parametrize(("text", "key", "why"), BROKEN, ids=[b[1] for b in BROKEN])
def test_a_broken_file_of_each_kind_names_the_file_and_the_key(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, key: str,
        why: str) -> None:
    path = write(tmp_path, text)
    rc, lines, _ = check(capsys, str(path))
    assert rc == 2
    named = [line for line in lines if line.startswith(f"{path}: key '{key}'")]
    assert len(named) == 1, lines
    assert why in named[0]
    assert "Traceback" not in "\n".join(lines)


def test_every_problem_is_listed_not_only_the_first(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, """\
        hosts:
          gpu-01: {ssh: 'root@10.0.0.1:99999'}
        http: {port: seventy}
        extra: {digest: {schedules: [{cron: '61 * * * *', channel: C1}]}}
        """)
    rc, lines, _ = check(capsys, str(path))
    assert rc == 2
    keys = [line.split("key '")[1].split("'")[0] for line in lines if "key '" in line]
    assert {"hosts.gpu-01.ssh", "http.port", "extra.digest.schedules.0.cron"} <= set(keys)


def test_secrets_come_from_the_environment_and_are_named(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SLACK_SIGNING_SECRET")
    monkeypatch.delenv("INCIDENT_BOT_ALERT_TOKEN")
    path = write(tmp_path, "slack: {channel: C1, socket_mode: true}\n")
    rc, lines, _ = check(capsys, str(path))
    assert rc == 2
    assert any(line.startswith("environment: SLACK_SIGNING_SECRET: not set") for line in lines)
    assert any(line.startswith("environment: SLACK_APP_TOKEN: not set") for line in lines)
    assert any(line.startswith("warning: environment: INCIDENT_BOT_ALERT_TOKEN") for line in lines)
    # an alerts-only replica needs no chat secrets: the warning alone passes
    rc, lines, out = check(capsys, str(path), "--alerts-only")
    assert rc == 0 and "no problems" in out
    assert [line for line in lines if not line.startswith("warning: ")] == []


def test_unreadable_yaml_and_a_list_at_the_top(tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, "hosts: [unclosed\n")
    rc, lines, _ = check(capsys, str(path))
    assert rc == 2 and lines[0].startswith(f"{path}: not valid YAML (line ")
    path.write_text("- a\n- b\n")
    rc, lines, _ = check(capsys, str(path))
    assert rc == 2 and lines == [f"{path}: top level must be a mapping, got list"]
    rc, lines, _ = check(capsys, str(tmp_path / "missing.yaml"))
    assert rc == 2 and "cannot read config file" in lines[0]


def test_serve_and_policy_check_stop_on_a_bad_cron_with_the_same_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, "extra: {digest: {schedules: [{cron: '61 * * * *', channel: C1}]}}\n")
    _, lines, _ = check(capsys, str(path))
    (line,) = [x for x in lines if "bad crontab" in x]
    for argv in (["serve", "-c", str(path), "--alerts-only", "--port", "0"],
                 ["serve", "-c", str(path), "--port", "0"],
                 ["policy", "check", "-c", str(path)]):
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert f"error: {line}" in err.splitlines(), (argv, err)
        assert "Traceback" not in err and "--alerts-only: webhooks" not in err


def test_a_good_file_passes_and_a_missing_key_file_is_a_warning(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    known = tmp_path / "known_hosts"
    known.write_text("")
    path = write(tmp_path, f"""\
        slack: {{channel: C1, approvers: [U1]}}
        hosts:
          gpu-01: {{ssh: 'root@10.0.0.1:22', key: {tmp_path}/nope, known_hosts: {known}}}
        """)
    rc, lines, out = check(capsys, str(path))
    assert rc == 0 and out.strip() == f"{path}: no problems (1 hosts)"
    assert lines == [f"warning: {path}: key 'hosts.gpu-01.key': {tmp_path}/nope: no such file, "
                     "or not readable by this user"]


def sim_config(tmp_path: Path, host: SimHost, extra_host: str = "") -> Path:
    return write(tmp_path, f"""\
        slack: {{channel: C1}}
        hosts:
          gpu-01: {{ssh: '{host.target}', key: {host.key_path},
                    known_hosts: {host.known_hosts_path}}}
        {extra_host}
        ssh_defaults: {{connect_timeout_s: 2, command_timeout_s: 5}}
        """)


def test_probe_logs_in_to_each_host_and_names_the_unreachable_one(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], sim_factory: SimFactory) -> None:
    host = sim_factory("seed")
    path = sim_config(tmp_path, host)
    rc, lines, out = check(capsys, str(path), "--probe")
    assert rc == 0 and "no problems (1 hosts and reachable)" in out, lines
    # it logged in and ran `true` (under the pool's host-side deadline)
    assert [str(e.get("command", "")).endswith("sh -c true") for e in host.command_log()] == [True]
    # a second host whose port nothing listens on: named, with the address
    path = sim_config(tmp_path, host, f"""  gpu-02: {{ssh: 'root@127.0.0.1:1', key: {host.key_path},
                    known_hosts: {host.known_hosts_path}}}""")
    rc, lines, _ = check(capsys, str(path), "--probe")
    assert rc == 2
    assert [x for x in lines if not x.startswith("warning: ")] == [
        x for x in lines if x.startswith(f"{path}: key 'hosts.gpu-02': could not reach "
                                         "root@127.0.0.1:1")]
    assert len([x for x in lines if "hosts.gpu-02" in x]) == 1


def test_the_checker_list_is_where_other_configs_plug_in(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(config_cmd, "CHECKERS", list(config_cmd.CHECKERS))
    config_cmd.add_checker(lambda c: [c.line("extensions.0", "no such directory")])
    path = write(tmp_path, "slack: {channel: C1}\n")
    rc, lines, _ = check(capsys, str(path))
    assert rc == 2 and lines == [f"{path}: key 'extensions.0': no such directory"]
