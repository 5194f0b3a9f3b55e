"""docker-compose.yml, the Dockerfile and the env example agree with the code.

Docker cannot run here, so the file is checked against what it names: every bot
service's command parses with the real CLI, every environment variable it sets is
one the bot reads, the example config loads, and the example Alertmanager config passes
``amtool``.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import typer
import yaml

from bot.cli import app
from bot.config.settings import Settings, load_settings
from tests.fixtures.need import need

ROOT = Path(__file__).resolve().parents[2]
COMPOSE: dict[str, Any] = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
SERVICES: dict[str, Any] = COMPOSE["services"]
BOT_SERVICES = [n for n, s in SERVICES.items() if "incident-bot" in str(s.get("image", ""))]
VAR = re.compile(r"\$\{([A-Z_][A-Z0-9_]*)(?:(:?[-?])([^}]*))?\}")
# read outside Settings (logging, the worker's alert hook): each is checked to be read
EXTRA_ENV = ("INCIDENT_BOT_LOG_LEVEL", "INCIDENT_BOT_ALERTS_URL")
CONFIG_IN_CONTAINER = "/etc/incident-bot/config.yaml"


def expand(text: str) -> str:
    """Compose interpolation with the defaults (``${X:-d}`` → d, ``${X:?m}`` → a value)."""
    return VAR.sub(lambda m: m.group(3) if m.group(2) in (":-", "-") else "set", text)


def settings_env_names() -> set[str]:
    return {name.upper() for name in Settings.model_fields}


def read_in_code(name: str) -> bool:
    pattern = re.compile(rf"environ(?:\.get)?\(\s*\"{name}\"|environ\[\s*\"{name}\"")
    return any(pattern.search(p.read_text()) for p in (ROOT / "bot").rglob("*.py"))


def allowed_env() -> set[str]:
    return settings_env_names() | set(EXTRA_ENV)


def env_of(service: dict[str, Any]) -> dict[str, str]:
    env = service.get("environment") or {}
    if isinstance(env, list):
        env = dict(item.split("=", 1) for item in env)
    return {k: expand(str(v)) for k, v in env.items()}


def test_compose_has_the_four_services_and_bot_images() -> None:
    assert set(SERVICES) == {"redis", "bot", "worker", "alertmanager"}
    assert sorted(BOT_SERVICES) == ["bot", "worker"]
    assert SERVICES["alertmanager"].get("profiles") == ["example"]


@pytest.mark.parametrize("name", BOT_SERVICES)
def test_each_bot_command_is_a_real_cli_invocation(name: str) -> None:
    args = [expand(str(a)) for a in SERVICES[name]["command"]]
    group = typer.main.get_command(app)
    assert isinstance(group, typer.core.TyperGroup)
    ctx = group.make_context("incident-bot", list(args), resilient_parsing=False)
    cmd_name, cmd, rest = group.resolve_command(ctx, list(args))
    assert cmd is not None and cmd_name == args[0]
    cmd.make_context(cmd_name, rest, parent=ctx)  # raises on an unknown or missing option
    assert args[args.index("--config") + 1] == CONFIG_IN_CONTAINER
    mounts = [str(v) for v in SERVICES[name]["volumes"]]
    assert f"./config.yaml:{CONFIG_IN_CONTAINER}:ro" in mounts


def test_extra_env_names_are_really_read_by_the_code() -> None:
    for name in EXTRA_ENV:
        assert read_in_code(name), f"{name} is allowed in compose but nothing reads it"
    assert {
        "REDIS_URL",
        "SLACK_BOT_TOKEN",
        "SLACK_SIGNING_SECRET",
        "SLACK_APP_TOKEN",
        "INCIDENT_BOT_ALERT_TOKEN",
    } <= settings_env_names()


@pytest.mark.parametrize("name", BOT_SERVICES)
def test_every_env_var_set_is_read_by_the_bot(name: str) -> None:
    unknown = set(env_of(SERVICES[name])) - allowed_env()
    assert not unknown, f"{name} sets variables nothing reads: {sorted(unknown)}"


def env_example_names() -> list[str]:
    names = []
    for line in (ROOT / ".env.example").read_text().splitlines():
        m = re.match(r"^#?\s*([A-Z][A-Z0-9_]*)=", line)
        if m:
            names.append(m.group(1))
    return names


def test_env_example_names_only_what_the_bot_reads() -> None:
    names = env_example_names()
    assert {
        "SLACK_BOT_TOKEN",
        "SLACK_SIGNING_SECRET",
        "SLACK_APP_TOKEN",
        "INCIDENT_BOT_ALERT_TOKEN",
    } <= set(names)
    assert set(names) <= allowed_env(), sorted(set(names) - allowed_env())
    assert SERVICES["bot"]["env_file"] == ".env"


def test_example_config_loads_with_the_compose_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    from bot.schedule.jobs import load_sections

    for key, value in env_of(SERVICES["bot"]).items():
        monkeypatch.setenv(key, value)
    settings = load_settings(ROOT / "deploy" / "config.example.yaml")
    assert settings.redis_url == "redis://redis:6379/0"
    sched, digest, escalation = load_sections(settings.extra)
    assert sched.lease_ttl_s + sched.renew_s <= 30  # "taken over within about 30 s"
    assert digest.schedules and escalation.after_minutes > 0
    assert settings.http.port == 8080
    assert any(str(p).endswith(":8080") for p in SERVICES["bot"]["ports"])


def test_redis_is_durable_on_a_named_volume() -> None:
    redis = SERVICES["redis"]
    cmd = [str(c) for c in redis["command"]]
    assert cmd[cmd.index("--appendonly") + 1] == "yes"
    assert cmd[cmd.index("--appendfsync") + 1] == "always"
    volume = next(str(v) for v in redis["volumes"] if str(v).endswith(":/data"))
    assert volume.split(":")[0] in COMPOSE["volumes"]
    assert SERVICES["bot"]["depends_on"]["redis"]["condition"] == "service_healthy"


def test_worker_reserves_the_gpus() -> None:
    devices = SERVICES["worker"]["deploy"]["resources"]["reservations"]["devices"]
    assert devices[0]["driver"] == "nvidia" and "gpu" in devices[0]["capabilities"]
    assert devices[0]["count"] == "all"
    assert (
        "SLACK_BOT_TOKEN" not in env_of(SERVICES["worker"]) and "env_file" not in SERVICES["worker"]
    )


def test_mounted_repo_files_and_dockerfile_exist() -> None:
    for svc in SERVICES.values():
        for vol in svc.get("volumes", []):
            src = expand(str(vol)).split(":")[0]
            if src.startswith("./") and src not in ("./config.yaml", "./ssh"):
                assert (ROOT / src).exists(), src
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert 'ENTRYPOINT ["tini", "--", "incident-bot"]' in dockerfile
    assert "EXPOSE 8080" in dockerfile and "USER bot" in dockerfile
    for src in re.findall(r"^COPY (\S+(?: \S+)*) \S+$", dockerfile, re.M):
        for part in src.split():
            assert (ROOT / part).exists(), part


def test_example_alertmanager_config_is_valid_and_points_at_the_bot() -> None:
    amtool = shutil.which("amtool")
    need(amtool is not None, "amtool comes with prometheus-alertmanager (scripts/setup.sh)")
    assert amtool is not None
    path = ROOT / "deploy" / "compose" / "alertmanager.yml"
    proc = subprocess.run(
        [amtool, "check-config", str(path)], capture_output=True, text=True, timeout=30
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    config = yaml.safe_load(path.read_text())
    hook = config["receivers"][0]["webhook_configs"][0]
    assert hook["url"] == "http://bot:8080/alerts/alertmanager"
    secret_file = hook["http_config"]["authorization"]["credentials_file"]
    assert secret_file == "/run/secrets/incident_bot_alert_token"
    assert SERVICES["alertmanager"]["secrets"] == ["incident_bot_alert_token"]
