"""deploy/sudoers/incident-bot grants exactly the catalog's commands.

Read the file the way sudo does for what it contains (Cmnd_Alias lists of a path and an
anchored POSIX ERE over the arguments joined by spaces) and check every command the
catalog renders for a non-root target against it. tests/integration has the same check
through the real sudo.
"""

from __future__ import annotations

import re
import shlex

import pytest

from bot.remediation.catalog import plan
from playbooks.probes import JOURNAL_USAGE
from tests.helpers.sudoers import CASES, NONROOT, SUDOERS, allowed, sudo_argv


@pytest.mark.parametrize(("kind", "params"), CASES)
def test_every_rendered_catalog_command_matches_an_allowlist_line(
    kind: str, params: dict[str, str]
) -> None:
    for command in plan(kind, params, NONROOT):
        assert allowed(sudo_argv(command)), command


def test_the_journal_probe_that_needs_root_is_allowed() -> None:
    assert allowed(shlex.split(JOURNAL_USAGE))


@pytest.mark.parametrize(
    "argv",
    [
        ["systemctl", "stop", "a.service", "b.service"],
        ["systemctl", "stop", "x.service;", "reboot"],
        ["systemctl", "stop", "-.mount"],
        ["systemctl", "restart", "vllm.service"],
        ["systemctl", "stop", "vllm"],
        ["kill", "-TERM", "1"],
        ["kill", "-9", "440"],
        ["kill", "-TERM", "440", "441"],
        ["journalctl", "--vacuum-size=500M", "--vacuum-time=1s"],
        ["journalctl", "--rotate"],
        ["bash", "-c", "id"],
        ["timeout", "-k", "2", "5", "bash", "-c", "systemctl stop x.service"],
        ["rm", "-f", "--", "/data/../etc/shadow"],
        ["rm", "-f", "--", "/etc/shadow"],
        ["rm", "-rf", "--", "/data/x"],
        ["rm", "-f", "--", "/data/a", "/data/b"],
        ["rm", "-f", "--", "/data/./x"],
        ["tee", "/etc/systemd/system/x.service.d/override.conf"],
        ["tee", "/etc/sudoers.d/x"],
        ["mkdir", "-p", "/etc/sudoers.d"],
        ["nvidia-smi", "--gpu-reset", "-i", "0,1"],
        ["nvidia-smi", "--gpu-reset", "-i", "64"],
        ["docker", "stop", "dcgm-exporter", "other"],
        ["docker", "rm", "-f", "dcgm-exporter"],
        ["docker", "exec", "dcgm-exporter", "sh"],
        ["docker", "stop", "-t", "0", "x"],
        ["systemctl", "mask", "--force", "a.service", "b.service"],
    ],
)
def test_anything_else_is_not_allowed(argv: list[str]) -> None:
    assert not allowed(argv)


def test_the_user_line_grants_only_the_aliases() -> None:
    text = SUDOERS.read_text()
    aliases = re.findall(r"^Cmnd_Alias (\w+) =", text, re.M)
    grant = re.search(r"^incident-bot ALL=\(root\) NOPASSWD: (.+)$", text, re.M)
    assert grant is not None and sorted(grant[1].split(", ")) == sorted(aliases)
    assert not re.search(r"NOPASSWD:\s*ALL\b", text)
