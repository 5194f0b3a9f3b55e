"""docker-compose.yml, the Dockerfile and the env example agree with the code.

Docker cannot run here (the docker client on this machine has no compose plugin, and
there is no engine), so the file is checked against what it names: every bot service's
command parses with the real CLI, every environment variable it sets is one the bot
reads, the example config loads, the example Alertmanager config passes ``amtool`` and
the proxy's ``haproxy -c``; a plain ``up`` starts no GPU worker, ``--scale bot=N`` meets
no fixed host port, and every ``docker compose`` command in docs/production.md names
real services, profiles and options.
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


def test_compose_has_the_five_services_and_bot_images() -> None:
    assert set(SERVICES) == {"redis", "bot", "proxy", "worker", "alertmanager"}
    assert sorted(BOT_SERVICES) == ["bot", "worker"]
    assert SERVICES["alertmanager"].get("profiles") == ["example"]


def started_by_plain_up() -> set[str]:
    """What `docker compose up -d` starts with no --profile: services without profiles."""
    return {name for name, svc in SERVICES.items() if not svc.get("profiles")}


def test_a_plain_up_starts_no_gpu_worker_and_no_example() -> None:
    assert started_by_plain_up() == {"redis", "bot", "proxy"}
    assert SERVICES["worker"]["profiles"] == ["gpu"]


def test_the_bot_scales_behind_the_proxy() -> None:
    """No fixed host port on the bot (a second replica would clash); the proxy publishes
    the one address and reaches the bot's container port by the service's name."""
    assert "ports" not in SERVICES["bot"]
    assert [str(p) for p in SERVICES["bot"]["expose"]] == ["8080"]
    (published,) = [expand(str(p)) for p in SERVICES["proxy"]["ports"]]
    assert published == "8080:8080"
    cfg_mount = next(str(v) for v in SERVICES["proxy"]["volumes"] if "haproxy.cfg" in str(v))
    cfg = (ROOT / cfg_mount.split(":")[0]).read_text()
    assert re.search(r"^\s*bind :8080$", cfg, re.M)
    template = re.search(r"^\s*server-template \S+ (\d+) (\w+):(\d+) (.*)$", cfg, re.M)
    assert template is not None and template[2] == "bot" and template[3] == "8080"
    assert int(template[1]) >= 2 and "check" in template[4] and "resolvers docker" in template[4]
    assert re.search(r"option httpchk GET /readyz", cfg)
    assert "EXPOSE 8080" in (ROOT / "Dockerfile").read_text()


def test_the_proxy_config_is_valid_haproxy() -> None:
    haproxy = shutil.which("haproxy") or ("/usr/sbin/haproxy" if Path("/usr/sbin/haproxy").exists()
                                          else None)
    need(haproxy is not None, "haproxy comes from Debian (scripts/setup.sh)")
    assert haproxy is not None
    proc = subprocess.run([haproxy, "-c", "-f", str(ROOT / "deploy/compose/haproxy.cfg")],
                          capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Configuration file is valid" in proc.stdout + proc.stderr


# what docs/production.md may say to `docker compose`: global options, subcommands and
# their options (those it uses); anything else in the doc fails the test
COMPOSE_GLOBAL = {"--profile"}
COMPOSE_SUBCOMMANDS = {
    "up": {"-d", "--no-deps", "--scale"}, "build": set(), "ps": set(), "exec": set(),
    "run": {"--rm", "--no-deps"}, "logs": {"-f"}, "down": set(),
}


def documented_commands() -> list[str]:
    text = (ROOT / "docs" / "production.md").read_text()
    found = re.findall(r"^(?:[A-Z_]+=\S+ )*(docker compose .+)$", text, re.M)
    found += re.findall(r"`(docker compose [^`]+)`", text)
    return sorted(set(found))


def check_compose_command(line: str) -> list[str]:
    """Problems with one `docker compose …` line (empty: every name in it is real)."""
    words, problems = line.split()[2:], []
    profiles = {p for svc in SERVICES.values() for p in svc.get("profiles", [])}
    active: set[str] = set()
    while words and words[0] in COMPOSE_GLOBAL:
        flag, value = words.pop(0), words.pop(0)
        if value not in profiles:
            problems.append(f"{flag} {value}: no service has that profile")
        active.add(value)
    sub = words.pop(0)
    if sub not in COMPOSE_SUBCOMMANDS:
        return [f"unknown subcommand {sub}"]
    while words and words[0].startswith("-"):
        flag = words.pop(0)
        if flag not in COMPOSE_SUBCOMMANDS[sub]:
            problems.append(f"{sub} {flag}: not an option this doc may use")
        if flag == "--scale":
            name, _, n = words.pop(0).partition("=")
            if name not in SERVICES or not n.isdigit():
                problems.append(f"--scale {name}={n}")
            elif "ports" in SERVICES[name]:
                problems.append(f"--scale {name}: it publishes a fixed host port")
    named = words[:1] if sub in ("exec", "run") else words
    for name in named:
        if name not in SERVICES:
            problems.append(f"no service {name}")
        elif set(SERVICES[name].get("profiles", [])) - active and sub == "up" and \
                "--no-deps" not in line and not active:
            problems.append(f"{name} is under a profile the command does not name")
    if sub in ("exec", "run") and len(words) > 1:
        args = words[2:] if words[1] == "incident-bot" else words[1:]
        problems += cli_problems(args)
    return problems


def cli_problems(args: list[str]) -> list[str]:
    group = typer.main.get_command(app)
    try:
        ctx = group.make_context("incident-bot", list(args), resilient_parsing=False)
        name, cmd, rest = group.resolve_command(ctx, list(args))
        while cmd is not None and hasattr(cmd, "resolve_command") and rest:
            sub_ctx = cmd.make_context(name, list(rest), parent=ctx)
            name, cmd, rest = cmd.resolve_command(sub_ctx, list(rest))
            ctx = sub_ctx
        assert cmd is not None
        cmd.make_context(name, list(rest), parent=ctx)
    except Exception as exc:  # a usage error: the doc names a command that does not parse
        return [f"incident-bot {' '.join(args)}: {exc}"]
    return []


def test_every_documented_compose_command_names_real_things() -> None:
    commands = documented_commands()
    assert "docker compose up -d --scale bot=2" in commands and len(commands) >= 6
    for line in commands:
        assert check_compose_command(line) == [], line


@pytest.mark.parametrize(("line", "words"), [
    ("docker compose up -d --scale bott=2", "--scale bott"),
    ("docker compose --profile gpus up -d worker", "no service has that profile"),
    ("docker compose exec bot incident-bot digest later", "digest later"),
    ("docker compose up -d --detach", "not an option"),
])
def test_the_doc_check_finds_a_wrong_command(line: str, words: str) -> None:
    assert any(words in p for p in check_compose_command(line)), check_compose_command(line)


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
    assert [str(p) for p in SERVICES["bot"]["expose"]] == [str(settings.http.port)]


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
    assert hook["url"] == "http://proxy:8080/alerts/alertmanager"
    secret_file = hook["http_config"]["authorization"]["credentials_file"]
    assert secret_file == "/run/secrets/incident_bot_alert_token"
    assert SERVICES["alertmanager"]["secrets"] == ["incident_bot_alert_token"]
