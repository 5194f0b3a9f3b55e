"""deploy/sudoers/incident-bot read the way sudo reads it, and the catalog cases that
must match it (shared by the unit check and the real-sudo integration check)."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

from bot.ssh.base import SSHTarget

SUDOERS = Path(__file__).resolve().parents[2] / "deploy" / "sudoers" / "incident-bot"
NONROOT = SSHTarget(name="gpu-01", host="10.0.0.1", user="incident-bot", sudo=True)
UNITS = ("vllm-kimi-k25-int4.service", "getty@tty1.service", "a:b_c.d-e.service", "x.socket")

# Every kind with parameters covering each branch of its rendering.
CASES: list[tuple[str, dict[str, str]]] = [
    *[("systemd.stop_disable", {"unit": u}) for u in UNITS],
    *[("systemd.mask", {"unit": u}) for u in UNITS],
    *[
        ("systemd.revert", {"unit": u, "unit_file_state": f, "active_state": a})
        for u in UNITS[:2]
        for f in ("enabled", "disabled", "masked")
        for a in ("active", "inactive")
    ],
    *[("process.terminate", {"pid": p}) for p in ("2", "440", "4194304")],
    *[("disk.journal_vacuum", {"size": s}) for s in ("1K", "500M", "2G", "999999T")],
    *[("systemd.mask_force", {"unit": u}) for u in UNITS],
    *[("systemd.dropin", {"unit": u}) for u in UNITS],
    *[("systemd.dropin_revert", {"unit": u}) for u in UNITS],
    *[(k, {"pid": "440"}) for k in ("process.sigterm", "process.sigkill")],
    *[("gpu.reset", {"gpu": g}) for g in ("0", "7", "63")],
    ("gpu.reset", {"gpu": "all", "release": "container:dcgm-exporter|unit:nvidia-dcgm.service|"
                                            "unit:nvidia-fabricmanager.service|"
                                            "unit:nvidia-persistenced.service"}),
    ("gpu.reset", {"gpu": "3", "release": "container:dcgm_exporter.1"}),
    ("host.reboot", {}),
    ("rma.handoff", {"incident": "INC-7"}),
    ("slurm.drain", {"node": "gpu-01", "reason": "GPU 2 fell off the bus (Xid 79)",
                     "incident": "INC-7"}),
    ("slurm.drain", {"node": "node-0.a_b", "reason": "ECC: 3 uncorrectable; GPU 0/1, +2",
                     "incident": ""}),
    ("slurm.resume", {"node": "gpu-01"}),
    *[(k, {"node": "gpu-01", "job": j}) for k in ("slurm.requeue", "slurm.cancel")
      for j in ("1", "4242", "9999999999_1234567")],
    ("disk.cleanup", {"paths": "/data/cache/huggingface/hub/models--a--b/blobs/5f1a|"
                               "/var/lib/systemd/coredump/core.python3.1312.zst|"
                               "/data/.cache/pip/http-v2/a/b|/shared/ckpt/run-a/step-1000.pt"}),
]


def allowlist() -> list[tuple[str, str]]:
    """(command path, argument pattern) for every command in every Cmnd_Alias."""
    text = SUDOERS.read_text().replace("\\\n", " ")
    entries = []
    for line in text.splitlines():
        if line.strip().startswith("Cmnd_Alias"):
            body = line.split("=", 1)[1].strip()
            for command in re.split(r",\s*(?=/)", body):
                path, _, args = command.strip().partition(" ")
                entries.append((path, args.strip()))
    return entries


def allowed(argv: list[str]) -> bool:
    path, args = f"/usr/bin/{argv[0]}", " ".join(argv[1:])
    for entry_path, pattern in allowlist():
        if entry_path != path:
            continue
        if pattern.startswith("^") and pattern.endswith("$"):
            if re.fullmatch(pattern[1:-1], args):
                return True
        elif pattern == args:
            return True
    return False


def sudo_argv(command: str) -> list[str]:
    """The root part: ``sudo -n ARGV``, or the sudo end of ``printf ... | sudo -n tee PATH``."""
    argv = shlex.split(command)
    if "|" in argv:
        argv = argv[argv.index("|") + 1:]
        assert argv[-1] == ">/dev/null", command
        argv = argv[:-1]
    assert argv[:2] == ["sudo", "-n"], command
    return argv[2:]
