"""The servers the ingest benchmark drives, and how it reads their CPU and memory.

``incident-bot serve`` (alerts only, or the full service with Slack at a local stand-in)
and the naive baseline server, each a process of its own; run as
``python bench/ingest_servers.py --naive-server PORT REDIS_URL`` for the baseline.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bot.core.procs import stop_child  # noqa: E402
from bot.rig.localredis import free_port  # noqa: E402
from storage import keys  # noqa: E402
from storage.connection import connect  # noqa: E402

TOKEN = "bench-token"
SLACK_TOKEN = "xoxb-0000-bench"
CHANNEL = "C0BENCH"
GROUP_WAIT_S = 30.0


def start_bot(redis_url: str, workdir: Path, group_commit: bool = True,
              slack_api: str | None = None) -> tuple[subprocess.Popen[bytes], int]:
    """``serve --alerts-only``, or with ``slack_api`` the full service (flow, scheduler,
    Slack pointed at the local stand-in)."""
    port = free_port()
    config = workdir / "bot.yaml"
    body: dict[str, Any] = {"alerts": {"group_wait_s": GROUP_WAIT_S},
                            "http": {"host": "127.0.0.1", "port": port,
                                     "group_commit": group_commit}}
    env = {**os.environ, "REDIS_URL": redis_url, "INCIDENT_BOT_ALERT_TOKEN": TOKEN,
           "INCIDENT_BOT_LOG_LEVEL": "ERROR"}
    argv = [sys.executable, "-m", "bot.cli", "serve", "--config", str(config)]
    if slack_api is None:
        argv.append("--alerts-only")
    else:
        body["slack"] = {"channel": CHANNEL, "approvers": ["UALICE"], "api_url": slack_api}
        env |= {"SLACK_BOT_TOKEN": SLACK_TOKEN, "SLACK_SIGNING_SECRET": "bench-signing-secret"}
    config.write_text(json.dumps(body))
    proc = subprocess.Popen(argv, env=env, cwd=ROOT)
    _wait_ready(port, proc)
    return proc, port


def start_naive(redis_url: str) -> tuple[subprocess.Popen[bytes], int]:
    port = free_port()
    proc = subprocess.Popen([sys.executable, __file__, "--naive-server", str(port), redis_url],
                            cwd=ROOT)
    _wait_ready(port, proc)
    return proc, port


def _wait_ready(port: int, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"server exited with {proc.returncode}")
        with contextlib.suppress(OSError):
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=1)
            conn.request("GET", "/healthz")
            if conn.getresponse().status == 200:
                return
        time.sleep(0.1)
    raise SystemExit("server did not start")


NAIVE_OPEN_LUA = """
local n = redis.call('INCR', KEYS[1])
redis.call('HSET', ARGV[1] .. n, 'host', ARGV[2], 'kind', ARGV[3])
redis.call('XADD', KEYS[2], '*', 'type', 'incident.opened', 'kind', ARGV[3])
return n
"""


def naive_server(port: int, redis_url: str) -> None:
    """The baseline: every alert delivery is a new incident and a new chat message."""
    import uvicorn
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    from bot.ingest import alertmanager
    from bot.ingest.mapping import Mapper

    redis, mapper = connect(redis_url), Mapper()
    # numbering, the incident hash and its event in one script call per alert, and every
    # call of a notification in one pipeline: one round trip and one fsync per notification
    open_one = redis.register_script(NAIVE_OPEN_LUA)

    def store(alerts: list[Any]) -> None:
        with redis.pipeline(transaction=False) as pipe:
            for a in alerts:
                open_one(keys=[keys.incident_seq(), keys.incident_events()],
                         args=[keys.incident("INC-"), a.host, a.kind], client=pipe)
            pipe.execute()

    async def ingest(request: Request) -> JSONResponse:
        from starlette.concurrency import run_in_threadpool

        alerts = alertmanager.parse(await request.body(), mapper)
        await run_in_threadpool(store, alerts)
        return JSONResponse({"accepted": len(alerts)})

    async def health(_: Request) -> JSONResponse:
        return JSONResponse({"status": "ok"})

    app = Starlette(routes=[Route("/alerts/alertmanager", ingest, methods=["POST"]),
                            Route("/healthz", health)])
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", access_log=False)


def rss_mib(pid: int) -> tuple[float, float]:
    """(current, peak) resident memory of a live process, MiB."""
    status = Path(f"/proc/{pid}/status").read_text()
    fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
    return (int(fields["VmRSS"].split()[0]) / 1024, int(fields["VmHWM"].split()[0]) / 1024)


def stop(proc: subprocess.Popen[bytes]) -> None:
    stop_child(proc, grace_s=15)


def _cpu_s(pid: int) -> float:
    """User+system CPU-seconds a live process has used (start-up included): a figure that
    waiting for a core on a shared machine does not inflate."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _redis_cpu_s(redis: Any) -> float:
    info = redis.info("cpu")
    return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])


def agent_rss() -> dict[str, float]:
    """Peak RSS (MiB) of one agent pass, lean entry point and through the CLI."""
    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "INCIDENT_BOT_ALERT_TOKEN": TOKEN, "INCIDENT_BOT_LOG_LEVEL": "ERROR"}
        common = ["--url", f"http://127.0.0.1:{free_port()}", "--once", "--state-dir",
                  f"{tmp}/state", "--mount", "/"]
        for label, cmd in (("python -m bot.agent", [sys.executable, "-m", "bot.agent"]),
                           ("incident-bot agent", [sys.executable, "-m", "bot.cli", "agent"])):
            script = ("import resource, subprocess, sys; subprocess.run(sys.argv[1:]); "
                      "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)")
            res = subprocess.run([sys.executable, "-c", script, *cmd, *common], env=env,
                                 capture_output=True, text=True, cwd=ROOT)
            out[label] = int(res.stdout.strip().splitlines()[-1]) / 1024
    return out


if __name__ == "__main__" and sys.argv[1:2] == ["--naive-server"]:
    naive_server(int(sys.argv[2]), sys.argv[3])
