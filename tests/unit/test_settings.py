"""Settings: YAML plus environment, secrets only from the environment, one-line errors."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from bot.config.settings import load_settings
from bot.core.errors import ConfigError

GOOD = """
redis_url: redis://localhost:6379/0
http: {host: 0.0.0.0, port: 8080}
slack:
  channel: C0123456789
  approvers: [U0AAAAAAA]
  api_url: https://slack.com/api/
hosts:
  gpu-01:
    ssh: root@10.1.230.174:22
    key: ~/.ssh/incident-bot
    known_hosts: ~/.ssh/known_hosts
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "config.yaml"
    path.write_text(text)
    return path


def test_design_example_loads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("REDIS_URL", raising=False)
    s = load_settings(write(tmp_path, GOOD))
    assert s.slack.approvers == ["U0AAAAAAA"]
    assert s.hosts["gpu-01"].ssh == "root@10.1.230.174:22"
    assert s.http.port == 8080


def test_env_overrides_redis_url_and_supplies_secrets(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("REDIS_URL", "redis://127.0.0.1:7000/3")
    monkeypatch.setenv("SLACK_SIGNING_SECRET", "s3cret")
    s = load_settings(write(tmp_path, GOOD))
    assert s.redis_url == "redis://127.0.0.1:7000/3"
    assert s.slack_signing_secret is not None
    assert s.slack_signing_secret.get_secret_value() == "s3cret"


def test_wrong_type_names_file_key_and_problem(tmp_path: Path) -> None:
    path = write(tmp_path, "http: {port: eighty}\n")
    with pytest.raises(ConfigError) as info:
        load_settings(path)
    msg = info.value.message
    assert str(path) in msg and "http.port" in msg and "integer" in msg
    assert "\n" not in msg
    assert info.value.exit_code == 2


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("slack_bot_token: xoxb-1\n", "environment"),
        ("bogus_key: 1\n", "bogus_key"),
        ("hosts: {gpu-01: {ssh: 'not a target!'}}\n", "hosts.gpu-01.ssh"),
        ("- a\n- b\n", "mapping"),
        ("http: [unclosed\n", "YAML"),
    ],
)
def test_bad_files_are_one_clear_line(tmp_path: Path, text: str, needle: str) -> None:
    with pytest.raises(ConfigError) as info:
        load_settings(write(tmp_path, text))
    assert needle in info.value.message


def test_cli_exits_2_without_traceback(tmp_path: Path) -> None:
    path = write(tmp_path, "http: {port: eighty}\n")
    proc = subprocess.run(
        [sys.executable, "-m", "bot.cli", "serve", "--config", str(path)],
        capture_output=True, text=True, timeout=60,
    )
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    # every problem, one line each; the file's own first (secrets from the environment after)
    assert "http.port" in lines[0] and all(line.startswith("error: ") for line in lines)


def test_misspelt_extra_section_is_named(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        load_settings(write(tmp_path, "extra: {remediaton: {settle_s: 1}}\n"))
    assert "remediaton" in info.value.message and "extra" in info.value.message


def test_bad_value_in_a_feature_section_fails_at_start(tmp_path: Path) -> None:
    from bot.service import check_sections

    settings = load_settings(write(tmp_path, "extra: {remediation: {settle_s: -1}}\n"))
    with pytest.raises(ConfigError) as info:
        check_sections(settings)
    assert "extra.remediation.settle_s" in info.value.message


@pytest.mark.parametrize(
    ("text", "key", "reason"),
    [
        ("hosts: {gpu-01: {ssh: 'root@127.0.0.1:99999'}}\n", "hosts.gpu-01.ssh",
         "port 99999 out of range 1..65535"),
        ("hosts: {gpu-01: {ssh: 'root@127.0.0.1:0'}}\n", "hosts.gpu-01.ssh",
         "port 0 out of range"),
        (f"hosts: {{gpu-01: {{ssh: 'root@{'a' * 64}.example:22'}}}}\n", "hosts.gpu-01.ssh",
         "over 63 characters"),
        ("hosts: {'gpu 01': {ssh: 'root@10.0.0.1:22'}}\n", "hosts", "not a host name"),
        ("redis_url: 'redis://localhost:70000/0'\n", "redis_url", "out of range"),
        ("redis_url: 'http://localhost:6379/0'\n", "redis_url", "redis://"),
        ("slack: {api_url: 'http://127.0.0.1:123456/api/'}\n", "slack.api_url",
         "out of range"),
    ],
)
def test_ports_and_hosts_refused_at_load_with_file_key_and_reason(
        tmp_path: Path, text: str, key: str, reason: str) -> None:
    """``ssh: root@127.0.0.1:99999`` used to pass the config and fail later as "neither a
    host in the config nor user@host:port" (issue 39)."""
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as info:
        load_settings(path)
    msg = info.value.message
    assert str(path) in msg and f"key '{key}'" in msg and reason in msg, msg
    assert "\n" not in msg


def test_ports_at_the_edges_of_their_range_load(tmp_path: Path) -> None:
    settings = load_settings(write(tmp_path, (
        "redis_url: 'redis://localhost:65535/0'\n"
        "hosts: {gpu-01: {ssh: 'root@10.0.0.1:1'}, gpu-02: {ssh: 'root@gpu-02.example:65535'}}\n")))
    assert settings.hosts["gpu-01"].ssh.endswith(":1")
