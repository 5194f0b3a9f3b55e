"""The "why" under docs/benchmarks.md's table: each goal this run missed, explained with
this run's own figures (never a sentence written for another run's numbers)."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

R = dict[str, Any]


def _diagnose_whole(r: R) -> str | None:
    if r["diagnose"] <= 1.0:
        return None
    imports = r["diagnose_imports"] - r["interpreter"]
    floor = r["diagnose_imports"] + r.get("sampler_s", 0.0)
    return (f"**`incident-bot diagnose`, whole process: {r['diagnose']:.3f} s against "
            f"≤ 1.0 s.** Before its first SSH byte the process spends {r['interpreter']:.3f} s "
            f"starting Python and {imports:.3f} s importing what a diagnosis needs (typer, "
            "paramiko and its cryptography, the playbook; no settings for an address with a "
            "key). The GPU sampler alone then takes "
            f"{r.get('sampler_s', 0.0):.3f} s (one `nvidia-smi` looping for three samples "
            "0.25 s apart, plus its start), and every other probe runs inside its window. "
            f"Start-up plus the sampler is {floor:.3f} s. A person whose shell names a "
            "running serve (`INCIDENT_BOT_URL`) skips all of it but the sampler: the next row.")


def _via_serve(r: R) -> str | None:
    ours = r.get("diagnose_via_serve")
    if ours is None or ours <= 0.5:
        return None
    inside = r["serve_playbook_s"]
    return (f"**`incident-bot diagnose` through serve: {ours:.3f} s against ≤ 0.5 s.** The "
            f"client's part is {ours - inside:.3f} s (Python, the standard library's HTTP, "
            f"{r['cpu']['diagnose_via_serve']:.3f} CPU-s in all); the diagnosis inside serve is "
            f"{inside:.3f} s, on a connection already open, and is the GPU sampler's window "
            "(three readings 0.25 s apart, 0.5 s, so that a pause between two kernels does not "
            "read as idle) plus `nvidia-smi`'s own start and the other probes inside it. "
            "0.5 s in all would need a window of about 0.3 s: `extra.diagnostics.samples` and "
            "`sample_interval_s` set it, for serve and standalone alike; we keep 0.5 s.")


def _fleet(r: R) -> str | None:
    fleet = r.get("fleet", [])
    rows = [x for x in fleet[1:] if int(x["hosts"]) <= 32]
    if not rows or rows[-1]["wall_s"] <= 3 * fleet[0]["wall_s"]:
        return None
    row, base = rows[-1], fleet[0]
    cores = os.cpu_count() or 1
    sshd = (f" (sshd alone, every command answered `exit 0`: "
            f"{row['sshd_only_cpu_per_host_s']:.3f} CPU-s a host)"
            if "sshd_only_cpu_s" in row else "")
    bot_alone = row["bot_cpu_s"] / cores
    return (f"**Fleet, {int(row['hosts'])} hosts: {row['wall_s']:.2f} s = "
            f"{row['wall_s'] / base['wall_s']:.2f}x one host, against ≤ 3x.** The hosts' sshds "
            f"run on the same {cores} cores as the bot and used {row['sim_cpu_s']:.1f} CPU-s"
            f"{sshd}, next to the bot's {row['bot_cpu_s']:.1f}. Together they need at least "
            f"{row['cpu_floor_s']:.2f} s of these cores "
            f"({row['cpu_floor_s'] / base['wall_s']:.2f}x one host); the run took "
            f"{row['wall_s'] / row['cpu_floor_s']:.2f}x that least. The bot's own CPU alone "
            f"needs {bot_alone:.2f} s (one host takes {base['wall_s']:.2f} s), and its cost per "
            f"host stays flat ({base['bot_cpu_per_host_s']:.3f} → "
            f"{row['bot_cpu_per_host_s']:.3f} CPU-s). With the hosts on other machines the "
            "fan-out would have that room; this machine cannot show it.")


def _ingest(r: R) -> str | None:
    runs = {x["name"]: x for x in r["runs"]}
    paced = runs["incident-bot paced"]
    if paced["p99_ms"] < 50 and paced["alerts_per_s"] >= 0.98 * paced["rate"]:
        return None
    busy = (f" The store writer (one write at a time per process) was busy "
            f"{100 * paced['writer_busy']:.0f}% of the run, {paced['write_mean_ms']:.1f} ms a "
            "write. A notification that lands behind a write waits for that write, then for "
            "its own." if "writer_busy" in paced else "")
    return (f"**Ingest at {paced['rate']:.0f} alerts/s: p99 {paced['p99_ms']:.1f} ms "
            f"({paced['alerts_per_s']:.0f} alerts/s sustained), against < 50 ms.**{busy}")


def _burst_visible(r: R) -> str | None:
    st, placed = r["stages"]["visible"], r["stages"].get("placed", {})
    if st["p99"] <= 3.0:
        return None
    chat = (f"; from its placement to its name in Slack p50 "
            f"{st['p50'] - placed['p50']:.1f} s" if placed.get("n") else "")
    return (f"**Burst, alert → visible in Slack: p99 {st['p99']:.1f} s against ≤ 3 s.** "
            f"Most of it came before chat: from the alert to the incident's place in a storm "
            f"p50 {placed.get('p50', float('nan')):.1f} s, p99 "
            f"{placed.get('p99', float('nan')):.1f} s{chat}. Placement is the serve "
            "processes reading the alert's event, one Lua script; on these two cores the "
            f"simulated hosts' sshds and tools used {r['sim_cpu_s']:.0f} CPU-s beside the "
            f"bots' {r['bot_cpu_s']:.0f} (load average {r['load'][0]:.0f} at the end), so the "
            "bots' threads waited for a core. Slack's own pace is the rest: the first storm "
            "message takes the channel's next post (about one a second), then each of the "
            f"{r['slack']['storms']} storms' tables is edited as the workspace's chat.update "
            "budget allows (50 a minute, shared: about one edit of each every "
            f"{60 / 50 * max(1, r['slack']['storms']):.1f} s).")


def _burst_cpu(stage: str, goal: str) -> Callable[[R], str | None]:
    """A stage the hosts' CPU on the same cores held back: the floor both sides need."""
    def explain(r: R) -> str | None:
        st = r["stages"][stage]
        floor = (r["sim_cpu_s"] + r["bot_cpu_s"]) / r["cores"]
        return (f"**Burst, alert → {stage}: {goal}.** p50 {st['p50']:.0f} s, p99 "
                f"{st['p99']:.0f} s. The simulated hosts (one sshd each, their tools Python "
                f"processes) used {r['sim_cpu_s']:.0f} CPU-s, "
                f"{r['sim_cpu_per_incident_s']:.2f} per incident, against the two bots' "
                f"{r['bot_cpu_s']:.0f} ({r['bot_cpu_per_incident_s']:.3f} per incident): the "
                f"work needs at least {floor:.0f} s of these {r['cores']} cores, and the run "
                f"took {r['took_s']:.0f} s. The bots' own share would need "
                f"{r['bot_cpu_s'] / r['cores']:.0f} s of them; with the hosts on their own "
                "machines (real GPU hosts run their tools, not ours), the hosts' CPU is not "
                "the bot's to wait for.")
    return explain


# benchmark -> [(the start of the table row it explains, explanation)]
EXPLAIN: dict[str, list[tuple[str, Callable[[R], str | None]]]] = {
    "startup": [("`incident-bot diagnose` on a sim host", _diagnose_whole),
                ("`incident-bot diagnose` through a running serve", _via_serve)],
    "diagnose": [("fleet: 32 hosts", _fleet)],
    "ingest": [("ingest,", _ingest)],
    "burst": [("alert → visible in Slack", _burst_visible),
              ("alert → diagnosed", _burst_cpu("diagnosed", "against p99 ≤ 10 s")),
              ("alert → auto-fixed and verified",
               _burst_cpu("verified", "against p50 ≤ 20 s past the restart window"))],
}


def _explain(name: str, result: R, row: str) -> str | None:
    for prefix, explain in EXPLAIN.get(name, []):
        if prefix in row and "error" not in result:
            try:
                return explain(result)
            except (KeyError, TypeError, ZeroDivisionError):
                return None
    return None


def misses_section(results: dict[str, R], missed: dict[str, list[str]]) -> list[str]:
    """Markdown lines: each miss explained with this run's figures; a missed row with no
    explanation here is still listed, never dropped."""
    lines = [f"- {_explain(name, results.get(name, {}), row) or f'Missed, see the table: {row}'}"
             for name, rows in missed.items() for row in rows]
    if not lines:
        return ["Every goal in the table was met in this run.", ""]
    return ["## Goals missed in this run, and why", "", *lines, ""]
