"""docs/benchmarks.md from one ``bench/run_all`` run: machine facts and one table.

Every row holds our figure, its alternative measured in the same run, the ratio, the
goal and whether it was met. Rows whose benchmark failed say "not measured" and why.
"""

from __future__ import annotations

import os
import platform
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from typing import Any

from report_misses import misses_section

Row = tuple[str, str, str, str, str, str]  # name, ours, alternative, ratio, goal, verdict
R = dict[str, Any]


def _version(argv: list[str]) -> str:
    if shutil.which(argv[0]) is None:
        return "not installed"
    proc = subprocess.run(argv, capture_output=True, text=True, check=False)
    return (proc.stdout or proc.stderr).strip().splitlines()[0][:80]


def machine_facts() -> dict[str, str]:
    cpu = "unknown"
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((line.split(":", 1)[1].strip() for line in f
                        if line.startswith("model name")), cpu)
    except OSError:
        pass
    try:
        import torch

        torch_v = str(torch.__version__)
    except ImportError:
        torch_v = "not installed"
    redis_v = _version(["redis-server", "--version"])
    match = re.search(r"v=(\S+)", redis_v)
    return {"cpu": cpu, "cores": str(os.cpu_count()), "python": sys.version.split()[0],
            "redis": match.group(1) if match else redis_v, "openssh": _version(["ssh", "-V"]),
            "torch": torch_v, "os": platform.platform()}


def _s(x: float) -> str:
    return f"{x:.3f} s" if x < 10 else f"{x:.1f} s"


def _ok(met: bool) -> str:
    return "met" if met else "**missed**"


def _startup(r: R) -> list[Row]:
    cpu = r.get("cpu", {})
    return [
        ("`incident-bot --help`, whole process", f"{_s(r['help'])} (CPU {_s(cpu['help'])})",
         f"`python -c pass` {_s(r['interpreter'])} (CPU {_s(cpu['interpreter'])})",
         f"{r['help'] / r['interpreter']:.2f}x", "≤ 0.3 s", _ok(r["help"] <= 0.3)),
        (f"`incident-bot diagnose` on a sim host, whole process ({int(r['commands'])} commands)",
         f"{_s(r['diagnose'])} (CPU {_s(cpu['diagnose'])}; imports alone "
         f"{_s(r['diagnose_imports'])}, CPU {_s(cpu['diagnose_imports'])}"
         + (f"; the playbook {_s(r['playbook_s'])}, its GPU sampler {_s(r['sampler_s'])}"
            if "sampler_s" in r else "") + ")",
         f"fresh ssh each {_s(r['fresh_ssh'])}; ControlMaster setup + "
         f"parallel {_s(r['controlmaster_parallel'])}",
         f"{r['fresh_ssh'] / r['diagnose']:.2f}x / "
         f"{r['controlmaster_parallel'] / r['diagnose']:.2f}x",
         "≤ 1.0 s; dominated by SSH", _ok(r["diagnose"] <= 1.0)),
        *_via_serve(r, cpu),
    ]


def _via_serve(r: R, cpu: R) -> list[Row]:
    """A person's diagnosis asked of a running serve (issue 37), beside the same run's
    standalone diagnosis, fresh ssh and ControlMaster."""
    if "diagnose_via_serve" not in r:
        return []
    ours = r["diagnose_via_serve"]
    return [(f"`incident-bot diagnose` through a running serve (warm pool), whole process "
             f"({int(r['commands'])} commands)",
             f"{_s(ours)} (CPU {_s(cpu['diagnose_via_serve'])}; the diagnosis inside serve "
             f"{_s(r['serve_playbook_s'])}, process + HTTP {_s(ours - r['serve_playbook_s'])})",
             f"standalone {_s(r['diagnose'])}; fresh ssh each {_s(r['fresh_ssh'])}; "
             f"ControlMaster setup + parallel {_s(r['controlmaster_parallel'])}",
             f"{r['diagnose'] / ours:.2f}x / {r['fresh_ssh'] / ours:.2f}x / "
             f"{r['controlmaster_parallel'] / ours:.2f}x", "≤ 0.5 s", _ok(ours <= 0.5))]


def _diagnose(r: R) -> list[Row]:
    one = r["one"]
    rows: list[Row] = [
        (f"diagnosis, warm pool ({r['playbook']}, {int(one['commands'])} commands)",
         _s(one["pool_warm"]), f"fresh `ssh` per command {_s(one['ssh_sequential'])}",
         f"{one['ssh_sequential'] / one['pool_warm']:.2f}x", "≥ 5x",
         _ok(one["ssh_sequential"] / one["pool_warm"] >= 5)),
        ("diagnosis, warm pool vs ControlMaster, commands in parallel", _s(one["pool_warm"]),
         f"ControlMaster parallel {_s(one['controlmaster_parallel'])} (sequential "
         f"{_s(one['controlmaster_sequential'])}, setup {_s(one['controlmaster_setup'])})",
         f"{one['controlmaster_parallel'] / one['pool_warm']:.2f}x", "≥ 1x",
         _ok(one["controlmaster_parallel"] >= one["pool_warm"])),
        ("bot CPU per warm diagnosis, cipher the bot asks for", f"AES-GCM "
         f"{1000 * one['cpu_aead_s']:.1f} ms", f"paramiko's first choice aes128-ctr + "
         f"hmac-sha2-256 (MAC compared in Python) {1000 * one['cpu_ctr_hmac_s']:.1f} ms",
         f"{one['cpu_ctr_hmac_s'] / one['cpu_aead_s']:.2f}x", "-", "-"),
        ("diagnosis critical path (one warm run)", f"total {_s(one['path_total'])}",
         f"GPU sampler {_s(one['path_sampler'])}; other probes end at "
         f"{_s(one['path_others_end'])}", "-", "others inside the sampler window",
         _ok(one["path_others_end"] <= one["path_sampler"] + 0.05)),
    ]
    fleet = r["fleet"]
    if len(fleet) >= 2:
        base = fleet[0]
        for row in fleet[1:]:
            n = int(row["hosts"])
            # what the cores allow for the CPU both sides used (older runs: the hosts' only)
            floor = row.get("cpu_floor_s", row["sim_cpu_s"] / int(os.cpu_count() or 1))
            best = max(floor, base["wall_s"]) / base["wall_s"]
            rows.append((f"fleet: {n} hosts at once vs 1 (fresh pool, connects included)",
                         f"{_s(row['wall_s'])} wall; bot {row['bot_cpu_per_host_s']:.3f} "
                         "CPU-s/host" + (f"; the pool idle after it {row['idle_cpu_ms_per_s']:.0f}"
                                         " ms CPU/s" if "idle_cpu_ms_per_s" in row else ""),
                         f"1 host {_s(base['wall_s'])}; bot "
                         f"{base['bot_cpu_per_host_s']:.3f} CPU-s/host; hosts' sshds used "
                         f"{row['sim_cpu_s']:.1f} CPU-s; bot + hosts need {_s(floor)} wall on "
                         f"these cores ({best:.2f}x one host at best){_sshd_floor(row, base)}",
                         f"{row['wall_s'] / base['wall_s']:.2f}x wall, "
                         f"{row['bot_cpu_per_host_s'] / base['bot_cpu_per_host_s']:.2f}x CPU/host",
                         "≤ 3x wall at 32; bot CPU/host flat",
                         _fleet_verdict(row, base, n)))
    return rows


def _sshd_floor(row: R, base: R) -> str:
    """What the hosts' sshds cost with every command answered ``exit 0``: the part of the
    floor no change to the bot or the replayed commands can remove."""
    if "sshd_only_cpu_s" not in row:
        return ""
    least = (row["bot_cpu_s"] + row["sshd_only_cpu_s"]) / int(os.cpu_count() or 1)
    return (f"; sshd alone {row['sshd_only_cpu_per_host_s']:.3f} CPU-s/host, so "
            f"{least / base['wall_s']:.2f}x one host before any command")


def _fleet_verdict(row: R, base: R, n: int) -> str:
    flat = row["bot_cpu_per_host_s"] <= 1.5 * base["bot_cpu_per_host_s"]
    wall = row["wall_s"] <= 3 * base["wall_s"] if n <= 32 else True
    return f"CPU/host {_ok(flat)}" + (f", wall {_ok(wall)}" if n <= 32 else "")


def _ingest(r: R) -> list[Row]:
    runs = {x["name"]: x for x in r["runs"]}
    return [*_ingest_latency(r, runs), *_ingest_rest(runs, r["agent"])]


def _ingest_latency(r: R, runs: dict[str, R]) -> list[Row]:
    """The goal row (paced at the rate, latency from each due time) and the most each
    server takes (senders as fast as they can: latency there is queueing by design)."""
    paced, per_req = runs["incident-bot paced"], runs["write per request paced"]
    naive_paced, ours, naive = runs["naive paced"], runs["incident-bot"], runs["naive"]
    sustained = paced["rate"] >= 2000 and paced["alerts_per_s"] >= 0.98 * paced["rate"]
    met = sustained and paced["p99_ms"] < 50
    return [
        (f"ingest, {paced['senders']} senders paced at {paced['rate']:.0f} alerts/s, "
         f"{r['alerts']} alerts ×2 (HA pair), latency from each due time",
         f"{paced['alerts_per_s']:.0f} alerts/s, p50 {paced['p50_ms']:.1f} ms, p99 "
         f"{paced['p99_ms']:.1f} ms; server CPU {paced['server_cpu_ms_per_100']:.0f} ms/100 "
         "alerts",
         f"a write per request: p99 {per_req['p99_ms']:.1f} ms, EXEC/request "
         f"{per_req['exec_per_request']:.2f} (ours {paced['exec_per_request']:.2f}); naive "
         f"(pipelined): p99 {naive_paced['p99_ms']:.1f} ms",
         f"p99 {per_req['p99_ms'] / paced['p99_ms']:.2f}x lower", "≥ 2,000/s with p99 < 50 ms",
         _ok(met)),
        (f"ingest, {ours['senders']} senders as fast as they can (always {ours['senders']} in "
         "flight, so latency is queueing)",
         f"{ours['alerts_per_s']:.0f} alerts/s, p50 {ours['p50_ms']:.1f} ms, p99 "
         f"{ours['p99_ms']:.1f} ms; EXEC/request {ours['exec_per_request']:.2f}",
         f"naive (pipelined) {naive['alerts_per_s']:.0f}/s, p99 {naive['p99_ms']:.1f} ms",
         f"{ours['alerts_per_s'] / naive['alerts_per_s']:.2f}x the rate", "-", "-"),
    ]


def _ingest_rest(runs: dict[str, R], agent: R) -> list[Row]:
    ours, naive = runs["incident-bot"], runs["naive"]
    chaos, full = runs["incident-bot+SIGKILL"], runs["full serve + Slack"]
    return [
        ("top-level chat messages for the storm (full serve, Slack stand-in)",
         f"{full['chat_top_level']} messages ({full['opened_events']} incident.opened)",
         f"naive: {naive['opened_events']} incidents opened, one message each",
         f"{naive['opened_events'] / max(1, full['chat_top_level']):.0f}x fewer", "-", "-"),
        ("redis-server SIGKILLed mid-storm: acknowledged and lost", f"{chaos['lost']}",
         f"{chaos['refused']} requests answered 503 and retried", "-", "0",
         _ok(chaos["lost"] == 0)),
        (f"`serve` RSS after {full['deliveries']} alert deliveries, {full['incidents']} incidents",
         f"{full['rss_mib']:.0f} MiB (peak {full['rss_peak_mib']:.0f})",
         f"`serve --alerts-only` {ours['rss_mib']:.0f} MiB", "-", "< 200 MB",
         _ok(full["rss_peak_mib"] * 1.048576 < 200)),
        ("agent RSS, one pass from its entry point", f"{agent['python -m bot.agent']:.0f} MiB",
         f"through `incident-bot agent` {agent['incident-bot agent']:.0f} MiB", "-",
         "< 60 MB", _ok(agent["python -m bot.agent"] * 1.048576 < 60)),
    ]


def _slack(r: R) -> list[Row]:
    c = r["claims"]
    return [
        (f"approval claim, 20 threads × {c['approvals']} approvals",
         f"one-script Lua claim {_s(c['lua_s'])}", f"WATCH/MULTI, same checks "
         f"{_s(c['watch_s'])}; ApprovalStore.claim (one round trip, also rights, two-person, "
         f"record returned) {_s(c['store_s'])}",
         f"{c['watch_s'] / c['lua_s']:.2f}x", "≥ 1x", _ok(c["watch_s"] >= c["lua_s"])),
        (f"Slack ack latency, {r['ack']['n']} signed block_actions",
         f"p99 {r['ack']['p99_ms']:.1f} ms", "Slack's limit 3000 ms",
         f"{3000 / r['ack']['p99_ms']:.0f}x under", "< 3000 ms", _ok(r["ack"]["p99_ms"] < 3000)),
    ]


def _extract(r: R) -> list[Row]:
    a, d = r["a"], r["d"]
    rows: list[Row] = [
        (f"extraction job vs bare loop ({r['setup']['samples']} samples, "
         f"{r['setup']['device']})", f"{_s(a['job']['s'])} (CPU {_s(a['job']['cpu_s'])})",
         f"bare loop, same fsync + rename, each batch written before the next forward (the "
         f"job overlaps them) {_s(a['bare']['s'])} (CPU {_s(a['bare']['cpu_s'])})",
         f"{a['overhead_ratio']:.3f} wall, {a['cpu_ratio']:.3f} CPU", "≤ 1.05",
         _ok(a["overhead_ratio"] <= 1.05)),
    ]
    if "one_thread" in a:  # the job's own cost, without intra-op threads contending
        one = a["one_thread"]
        rows.append(("extraction job vs bare loop, torch on one thread",
                     f"{_s(one['job']['s'])} (CPU {_s(one['job']['cpu_s'])})",
                     f"bare loop {_s(one['bare']['s'])} (CPU {_s(one['bare']['cpu_s'])})",
                     f"{one['overhead_ratio']:.3f} wall, {one['cpu_ratio']:.3f} CPU", "≤ 1.05",
                     _ok(one["overhead_ratio"] <= 1.05)))
    if "production" in d:
        p = d["production"]
        rows.append(("worker SIGKILL → job running again, production settings",
                     _s(p["worker_kill_s"]), f"work-horse SIGKILL {_s(p['horse_kill_s'])}",
                     "-", "≤ 60 s", _ok(p["worker_kill_s"] <= 60)))
    return rows


def _digest(r: R) -> list[Row]:
    w, f, t = r["writes"], r["fleet"], r["takeover"]
    worst = max(t["times"])
    return [
        (f"sample writes, {w['probes']} probes × 26 readings (AOF always)",
         f"one pipelined add_many per probe {_s(w['pipelined_s'])}",
         f"one add per reading {_s(w['each_s'])}", f"{w['each_s'] / w['pipelined_s']:.1f}x",
         "-", "-"),
        (f"digest of a fleet day ({f['hosts']} hosts × 8 GPUs, {f['points']:.0f} points)",
         f"build from Redis {_s(f['build_s'])}, chart {_s(f['chart_s'])}",
         f"storing the day {_s(f['store_s'])}", "-", "-", "-"),
        (f"scheduler leader takeover, {len(t['times'])} trials", f"max {_s(worst)}",
         f"bound ttl + renew {_s(t['bound_s'])}", "-", "≤ bound",
         _ok(worst <= t["bound_s"] + 0.5)),
    ]


def _sim(r: R) -> list[Row]:
    return [
        (f"sim hosts: start {r['hosts']} at once", f"{_s(r['start_many_s'])} "
         f"({r['alive']} alive)", f"one after another {_s(r['start_one_s'])} each (median of 8)",
         f"{r['start_one_s'] * r['hosts'] / r['start_many_s']:.2f}x", "-", "-"),
        ("OpenSSH round trip `true`, sim's key exchange", _s(r["ssh_fast_kex_s"]),
         f"sshd default (sntrup761) {_s(r['ssh_default_kex_s'])}",
         f"{r['ssh_default_kex_s'] / r['ssh_fast_kex_s']:.2f}x", "-", "-"),
    ]


def _first(r: R) -> list[Row]:
    ours, before = r["alert card + parents first"], r["before"]
    card_only = r["alert card"]
    return [
        (f"first message: {r['hosts']} alerts at once, one host's `nvidia-smi` hung (serve, "
         "Slack's pace 1 post/s per channel)",
         f"parents: first {_s(ours['first_parent_s'])}, last {_s(ours['last_parent_s'])} "
         f"(hung host {_s(ours['hung_parent_s'])}); full cards: last {_s(ours['last_card_s'])}",
         f"before (no message until diagnosed, due order): first "
         f"{_s(before['first_parent_s'])}, last {_s(before['last_parent_s'])} (hung host "
         f"{_s(before['hung_parent_s'])}); alert card without parents first: last "
         f"{_s(card_only['last_parent_s'])} (hung host {_s(card_only['hung_parent_s'])})",
         f"{before['last_parent_s'] / ours['last_parent_s']:.2f}x",
         f"last parent ≤ Slack's pace ({r['hosts'] - 1} s) + 2 s",
         _ok(ours["last_parent_s"] <= r["hosts"] - 1 + 2.0)),
    ]


def _card_behind(r: R) -> list[Row]:
    ours, before = r["rows"]["edits overtake"], r["rows"]["in order"]
    return [
        (f"card's last edit behind its own thread replies: {ours['cards']} incidents, 2 "
         "replies each queued with it (Slack's pace 1 post/s per channel)",
         f"last card {_s(ours['last_card_s'])} (median {_s(ours['median_card_s'])}); "
         f"last reply {_s(ours['last_reply_s'])}",
         f"each incident's items in order: last card {_s(before['last_card_s'])} (median "
         f"{_s(before['median_card_s'])}); last reply {_s(before['last_reply_s'])}",
         f"{r['ratio']:.2f}x", "-", "-"),
    ]


def _gate(r: R) -> list[Row]:
    return [
        ("health gate on a sim host, warm pool (readings; `dcgmi diag -r 1` then `-r 2`; the "
         "CUDA smoke; the sim answers DCGM and the smoke at once)",
         f"whole gate {_s(r['gate']['median_s'])} (p90 {_s(r['gate']['p90_s'])}): readings "
         f"{_s(r['readings']['median_s'])}, dcgm {_s(r['dcgm']['median_s'])}, smoke "
         f"{_s(r['smoke']['median_s'])}",
         f"the readings level alone (the gate before issue 36) "
         f"{_s(r['readings_alone']['median_s'])}",
         f"{r['ratio']:.2f}x the time (gate / readings alone)", "-", "-"),
    ]


def _fleet_digest(r: R) -> list[Row]:
    sizes = {int(x["hosts"]): x for x in r["sizes"]}
    base = sizes[min(sizes)]
    rows: list[Row] = []
    for n, x in sorted(sizes.items()):
        if n == min(sizes):
            continue
        per_host = (x["build_s"] + x["chart_s"]) / n
        base_per_host = (base["build_s"] + base["chart_s"]) / int(base["hosts"])
        rows.append((f"digest of a fleet day, {n} hosts ({r['step_s']:.0f} s samples; "
                     "ranked by need, heatmaps past 8 hosts)",
                     f"build {_s(x['build_s'])}, chart {_s(x['chart_s'])}; message "
                     f"{x['blocks']} blocks, {x['needs']} hosts need a person, "
                     f"{x['named']} named" + (", the rest counted" if x["cut_said"] else ""),
                     f"{int(base['hosts'])} hosts: build {_s(base['build_s'])}, chart "
                     f"{_s(base['chart_s'])}",
                     f"{per_host / base_per_host:.2f}x per host", "no host left out unsaid",
                     _ok(bool(x["cut_said"]))))
    return rows


BURST_STAGES = {  # stage -> (what it is, NVSentinel's figure it is beside, our goal)
    "stored": ("alert → stored (the webhook answered 200)", None, None),
    "placed": ("alert → placed in a storm (its row due in the next edit)", None, None),
    "visible": ("alert → visible in Slack (own message or a storm's)", None, ("p99", 3.0)),
    "diagnosed": ("alert → diagnosed", None, ("p99", 10.0)),
    "dispatched": ("alert → auto fix dispatched", "dispatched", None),
    "verified": ("alert → auto-fixed and verified", "back", ("p50", 20.0)),
    "drained": ("alert → drained in Slurm (auto)", "quarantined", None),
}
NV_NAMES = {"quarantined": "detect → quarantined", "dispatched": "→ remediation dispatched",
            "back": "→ back in service"}


def _burst(r: R) -> list[Row]:
    """One row per stage beside NVSentinel's published figure (their time / ours), then
    the costs per incident."""
    head = (f"burst: {r['hosts']} hosts through {r['replicas']} serve replicas, alerts within "
            f"{r['spread_s']:.0f} s")
    rows: list[Row] = []
    for stage, (what, theirs, goal) in BURST_STAGES.items():
        st = r["stages"].get(stage, {})
        if not st or not st.get("n"):
            continue
        ours = f"p50 {_s(st['p50'])}, p99 {_s(st['p99'])}, max {_s(st['max'])} (n {st['n']})"
        alt, ratio = "-", "-"
        if theirs:
            p50, p99 = r["nvsentinel"][theirs]
            alt = f"NVSentinel {NV_NAMES[theirs]}: p50 {p50:g} s" + (f", p99 {p99:g} s"
                                                                     if p99 else "")
            ratio = f"{p50 / st['p50']:.2f}x p50" + (f", {p99 / st['p99']:.2f}x p99"
                                                     if p99 else "")
        verdict = "-"
        if goal:
            q, limit = goal
            extra = " past the unit's restart window" if stage == "verified" else ""
            verdict = _ok(st[q] <= limit)
            goal_text = f"{q} ≤ {limit:g} s{extra}"
        else:
            goal_text = "-"
        rows.append((f"{head}: {what}", ours, alt, ratio, goal_text, verdict))
    sl = r["slack"]
    idle = r.get("idle", {})
    over = (f" ({r['bot_cpu_marginal_per_incident_s']:.3f} over the replicas' idle "
            f"{1000 * idle['bot_cpu_per_s']:.0f} ms CPU/s)" if idle else "")
    redis_over = (f" ({r['redis_marginal_per_incident']:.0f} over their idle "
                  f"{idle['redis_per_s']:.0f}/s)" if idle else "")
    rows.append((f"{head}: cost per incident",
                 f"bots {r['bot_cpu_per_incident_s']:.3f} CPU-s{over}, Redis "
                 f"{r['redis_commands_per_incident']:.0f} commands{redis_over}, Slack "
                 f"{sl['posts_per_incident']:.2f} posts + {sl['updates_per_incident']:.2f} edits "
                 f"({sl['top_level']} top-level messages, {sl['storms']} storms)",
                 f"the simulated hosts (sshd, sessions, tools) "
                 f"{r['sim_cpu_per_incident_s']:.3f} CPU-s per incident on the same "
                 f"{r['cores']} cores", f"{r['sim_cpu_s'] / max(r['bot_cpu_s'], 1e-9):.1f}x "
                 "hosts/bots CPU", "-", "-"))
    return rows


SECTIONS: dict[str, Callable[[R], list[Row]]] = {
    "digest": _digest, "sim": _sim,
    "startup": _startup, "diagnose": _diagnose, "ingest": _ingest, "slack": _slack,
    "extract": _extract, "first": _first, "gate": _gate, "fleetdigest": _fleet_digest,
    "burst": _burst, "card": _card_behind,
}


def rows_for(name: str, result: R) -> list[Row]:
    if "error" in result:
        return [(f"{name}", "not measured", result["error"], "-", "-", "**missed**")]
    try:
        return SECTIONS[name](result)
    except (KeyError, TypeError, ZeroDivisionError) as exc:
        return [(f"{name}", "not measured", f"incomplete result: {exc!r}", "-", "-", "**missed**")]


def render(results: dict[str, R], facts: dict[str, str]) -> str:
    lines = ["# Benchmarks", "",
             "Written by `bench/run_all` from one run; every row's alternative was measured "
             "in the same run on the same machine. Re-run it rather than editing this file.", "",
             f"- date: {facts['date']} ({facts['mode']}, took {facts['took']})",
             f"- CPU: {facts['cpu']}; cores: {facts['cores']}; load average before "
             f"{facts['load_before']}, after {facts['load_after']}",
             f"- Python {facts['python']}; Redis {facts['redis']}; {facts['openssh']}; "
             f"torch {facts['torch']}; {facts['os']}",
             *([f"- conditions: {facts['note']}"] if facts.get("note") else []), "",
             "| benchmark | ours | alternative (same run) | ratio | goal | result |",
             "|---|---|---|---|---|---|"]
    missed: dict[str, list[str]] = {}
    for name, result in results.items():
        for row in rows_for(name, result):
            lines.append("| " + " | ".join(cell.replace("|", "/") for cell in row) + " |")
            if "missed" in row[5]:
                missed.setdefault(name, []).append(row[0])
    lines += ["", "How each is measured: see the docstring at the top of each script in "
              "`bench/` (`startup.py`, `diagnose.py`, `ingest.py`, `bench_slack.py`, "
              "`extract.py`, `digest_bench.py`, `bench_sim.py`, `first_message.py`, "
              "`card_behind_replies.py`, `gate_levels.py`, `digest_fleet.py`, `burst.py`). Ratios "
              "are the alternative's "
              "time over ours (higher is better for us), except the extraction row (job time / "
              "bare time, lower is better). Wall times on a shared machine include waiting for a "
              "core; CPU-seconds do not.", "", *misses_section(results, missed)]
    return "\n".join(lines)
