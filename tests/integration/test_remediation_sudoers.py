"""The allowlist through the real sudo: `sudo -l -U incident-bot CMD` decides.

Nothing on this machine changes: in a private mount namespace (``unshare --mount``)
a temporary /etc/sudoers that includes deploy/sudoers/incident-bot, and a passwd/group
with the ``incident-bot`` user, are bind-mounted over the real ones. Needs root, sudo
(>= 1.9.10 for regular expressions) and util-linux's unshare.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from bot.remediation.catalog import plan
from playbooks.probes import JOURNAL_USAGE
from tests.fixtures.need import need
from tests.helpers.sudoers import CASES, NONROOT, SUDOERS, sudo_argv


@pytest.fixture(autouse=True)
def _root_and_tools() -> None:
    need(os.geteuid() == 0 and all(shutil.which(t) for t in ("sudo", "visudo", "unshare")),
         "needs root, sudo, visudo and unshare (apt-get install sudo util-linux)")


HELPER = r"""
import json, subprocess, sys
d = sys.argv[1]
for name in ("passwd", "group", "sudoers"):
    subprocess.run(["mount", "--bind", f"{d}/{name}", f"/etc/{name}"], check=True)
out = {}
for argv in json.load(open(f"{d}/commands.json")):
    rc = subprocess.run(["sudo", "-l", "-U", "incident-bot", *argv],
                        capture_output=True).returncode
    out[" ".join(argv)] = rc == 0
print(json.dumps(out))
"""

DENIED = [
    ["/usr/bin/systemctl", "stop", "a.service", "b.service"],
    ["/usr/bin/systemctl", "stop", "x.service;reboot"],
    ["/usr/bin/systemctl", "stop", "$(touch /tmp/CANARY).service"],
    ["/usr/bin/systemctl", "restart", "vllm.service"],
    ["/usr/bin/kill", "-TERM", "1"],
    ["/usr/bin/kill", "-KILL", "440", "441"],
    ["/usr/bin/journalctl", "--vacuum-time=1s"],
    ["/usr/bin/timeout", "-k", "2", "5", "bash", "-c", "id"],
    ["/bin/bash", "-c", "id"],
    ["/usr/bin/rm", "-f", "--", "/data/../etc/shadow"],
    ["/usr/bin/rm", "-f", "--", "/data/a,/etc/shadow"],
    ["/usr/bin/rm", "-rf", "--", "/data/x"],
    ["/usr/bin/tee", "/etc/sudoers.d/x"],
    ["/usr/bin/nvidia-smi", "--gpu-reset"],
    ["/usr/bin/scontrol", "update", "NodeName=gpu-01", "State=DOWN", "Reason=incident-bot: x"],
    ["/usr/bin/scontrol", "update", "NodeName=gpu-01", "State=DRAIN", "Reason=maintenance"],
    ["/usr/bin/scontrol", "update", "NodeName=gpu-01", "State=DRAIN", "Reason=incident-bot: x",
     "Weight=1"],
    ["/usr/bin/scontrol", "update", "NodeName=gpu-[01-99]", "State=RESUME"],
    ["/usr/bin/scontrol", "delete", "NodeName=gpu-01"],
    ["/usr/bin/scontrol", "shutdown"],
    ["/usr/bin/scancel", "-u", "alice"],
    ["/usr/bin/scancel", "--state=RUNNING"],
    ["/usr/bin/scancel", "4242", "4243"],
    ["/usr/bin/scontrol", "requeuehold", "4242"],
]


def _absolute(command: str) -> list[str]:
    argv = sudo_argv(command)
    return [f"/usr/bin/{argv[0]}", *argv[1:]]


def _judge(tmp_path: Path, commands: list[list[str]]) -> dict[str, bool]:
    shutil.copy(SUDOERS, tmp_path / "ib")
    (tmp_path / "sudoers").write_text(f"root ALL=(ALL:ALL) ALL\n@include {tmp_path}/ib\n")
    for name in ("sudoers", "ib"):
        (tmp_path / name).chmod(0o440)
    passwd = Path("/etc/passwd").read_text()
    (tmp_path / "passwd").write_text(passwd + "incident-bot:x:4242:4242::/nonexistent:/bin/false\n")
    (tmp_path / "group").write_text(Path("/etc/group").read_text() + "incident-bot:x:4242:\n")
    (tmp_path / "commands.json").write_text(json.dumps(commands))
    proc = subprocess.run(
        [
            "unshare",
            "--mount",
            "--propagation",
            "private",
            sys.executable,
            "-c",
            HELPER,
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    return dict(json.loads(proc.stdout))


def test_visudo_accepts_the_file() -> None:
    proc = subprocess.run(["visudo", "-cf", str(SUDOERS)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_real_sudo_allows_every_catalog_command_and_nothing_else(tmp_path: Path) -> None:
    every = [_absolute(c) for kind, params in CASES for c in plan(kind, params, NONROOT)]
    # sudo -l answers "not found" for a program this machine lacks (nvidia-smi here);
    # those lines are still matched against the file by tests/unit
    allowed = [c for c in every if Path(c[0]).exists()]
    allowed.append(["/usr/bin/journalctl", *shlex.split(JOURNAL_USAGE)[1:]])
    verdicts = _judge(tmp_path, allowed + DENIED)
    refused = [c for c in allowed if not verdicts[" ".join(c)]]
    assert refused == []
    let_through = [c for c in DENIED if verdicts[" ".join(c)]]
    assert let_through == []
