"""The CLI lists DESIGN's subcommands, each with --help."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

SUBCOMMANDS = ["demo", "serve", "diagnose", "act", "incidents", "audit", "silence", "worker",
               "agent", "sim", "extract", "digest", "postmortem", "policy", "config"]


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "bot.cli", *args], capture_output=True,
                          text=True, timeout=120)


def test_help_lists_every_subcommand() -> None:
    proc = run("--help")
    assert proc.returncode == 0
    for name in SUBCOMMANDS:
        assert name in proc.stdout


@pytest.mark.parametrize("name", SUBCOMMANDS)
def test_each_subcommand_has_help(name: str) -> None:
    proc = run(name, "--help")
    assert proc.returncode == 0, proc.stderr
    assert "Usage" in proc.stdout


def test_unknown_option_is_a_usage_error_not_a_crash() -> None:
    proc = run("incidents", "--bogus")
    assert proc.returncode == 2
    assert "No such option" in proc.stderr
    assert "Traceback" not in proc.stderr and "internal error" not in proc.stderr


def loaded_after(argv: list[str]) -> set[str]:
    """Top-level packages (``bot.*`` and ``playbooks.*`` in full) imported by one CLI run."""
    code = ("import json, sys; from bot.cli import main; main(json.loads(sys.argv[1])); "
            "print(json.dumps(sorted({m if m.startswith(('bot.', 'playbooks.')) "
            "else m.split('.')[0] for m in sys.modules})))")
    out = subprocess.run([sys.executable, "-c", code, json.dumps(argv)], capture_output=True,
                         text=True, timeout=60, check=True).stdout
    return set(json.loads(out.strip().splitlines()[-1]))


def test_help_imports_no_redis_prometheus_or_httpx() -> None:
    loaded = loaded_after(["--help"])
    assert "typer" in loaded  # the probe sees what was imported
    assert not {"redis", "prometheus_client", "httpx", "pydantic_settings", "paramiko",
                "playbooks"} & loaded, sorted(loaded)


def test_diagnose_imports_ssh_settings_and_only_its_playbook() -> None:
    # nothing listens on port 1: the run ends unreachable, after loading what it needs
    loaded = loaded_after(["diagnose", "nobody@127.0.0.1:1", "--playbook", "vm_restart",
                           "--json"])
    # gpu_health is the GPU view every playbook carries (playbooks/pipeline.py); an
    # address with no --config loads no settings at all (issue 37)
    assert {"paramiko", "playbooks.vm_restart", "playbooks.gpu_health"} <= loaded
    unused = {"redis", "prometheus_client", "httpx", "rich", "invoke", "storage", "rq",
              "playbooks.triage", "bot.flow", "bot.chat", "bot.config.settings",
              "pydantic_settings", "yaml"}
    assert not unused & loaded, sorted(unused & loaded)
