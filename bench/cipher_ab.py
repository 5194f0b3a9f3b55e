"""The bot's CPU per warm diagnosis with the cipher it asks for (AES-GCM, an AEAD) and
with paramiko's own first choice (aes128-ctr + hmac-sha2-256, whose MAC paramiko compares
byte by byte in Python), alternated on the same sim host in the same run."""

from __future__ import annotations

import statistics
import time

from bot.sim.sshd import SimHost
from bot.ssh import connect
from bot.ssh.pool import ParamikoPool
from playbooks import run_playbook


def bot_cpu_per_diagnosis(host: SimHost, playbook: str, aead: tuple[str, ...],
                          runs: int) -> float:
    """Mean CPU-seconds of this process per warm diagnosis with ``aead`` ciphers first."""
    saved, connect.AEAD_FIRST = connect.AEAD_FIRST, aead
    try:
        with ParamikoPool() as pool:
            run_playbook(pool, host.ssh_target(), playbook)  # connect and warm up
            cpu0 = time.process_time()
            for _ in range(runs):
                run_playbook(pool, host.ssh_target(), playbook)
            return (time.process_time() - cpu0) / runs
    finally:
        connect.AEAD_FIRST = saved


def cipher_ab(host: SimHost, playbook: str, rounds: int = 3, runs: int = 6) -> dict[str, float]:
    """Medians over ``rounds`` alternations of ``runs`` warm diagnoses each way."""
    ours, theirs = [], []
    for _ in range(rounds):
        ours.append(bot_cpu_per_diagnosis(host, playbook, connect.AEAD_FIRST, runs))
        theirs.append(bot_cpu_per_diagnosis(host, playbook, (), runs))
    return {"cpu_aead_s": statistics.median(ours), "cpu_ctr_hmac_s": statistics.median(theirs)}
