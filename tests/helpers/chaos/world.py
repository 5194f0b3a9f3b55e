"""The processes of a chaos run: a private ``redis-server`` (AOF, ``appendfsync always``,
made able to refuse), the Slack stand-in, simulated hosts behind real sshds (each reached
through a delay proxy), and ``serve`` replicas as children; torn down by PID."""

from __future__ import annotations

import io
import json
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bot.rig.localredis import LocalRedis, start_local_redis
from bot.rig.slack_standin import SlackStandIn
from bot.sim.sshd import SimHost, start_sim
from bot.sim.state import SimCall, load_state, locked, write_state
from bot.sim.tools.systemctl_act import act
from storage.audit import AuditLog
from storage.connection import connect
from storage.incidents import IncidentStore
from tests.helpers.chaos.proxy import DelayProxy
from tests.helpers.redis_faults import FAULT_ARGS, RedisFaults
from tests.helpers.serve_process import BOT_TOKEN, CHANNEL, ServeProcess

UNIT = "vllm-kimi-k25-int4.service"
# short deadlines: a fault's effect must end within a deadline and a period, and the run
# should not wait the production defaults (120 s, 300 s, 900 s) for it
RECONCILE = {"every_s": 1.0, "open_s": 10.0, "diagnosing_s": 20.0, "acting_s": 30.0}
REMEDIATION = {"settle_s": 0.3, "verify_timeout_s": 8.0}
SSH = {"connect_timeout_s": 3.0, "command_timeout_s": 5.0}


@dataclass
class Host:
    """One simulated GPU host as the bot sees it (through ``proxy``) and as the run arms it."""

    name: str
    sim: SimHost
    proxy: DelayProxy
    armed: dict[str, Any]  # the seed state: vLLM holds every GPU
    host_key: tuple[bytes, str]  # the original host key (private, public line)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def arm(self) -> None:
        """The condition again: the unit active, enabled, holding the GPUs."""
        with locked(self.sim.workdir):
            write_state(self.sim.workdir, self.armed)

    def condition(self) -> bool:
        """The host shows the condition now (the unit active and holding GPU memory)."""
        unit = self.sim.state()["units"].get(UNIT) or {}
        return unit.get("active_state") == "active"

    def fix_by_hand(self) -> None:
        """What an operator does outside the bot: ``systemctl stop`` and ``disable`` run by
        the host's own tool code, not through a session, so the command log keeps only what
        the bot ran."""
        ctx = SimCall(self.sim.workdir, out=io.StringIO(), err=io.StringIO())
        act(ctx, "stop", [UNIT], {})
        act(ctx, "disable", [UNIT], {})


@dataclass
class World:
    tmp: Path
    redis: LocalRedis
    redis_faults: RedisFaults
    standin: SlackStandIn
    hosts: list[Host]
    serves: list[ServeProcess]
    store: IncidentStore  # the run's own reads of Redis (the checker's history)

    @classmethod
    def start(cls, tmp: Path, *, hosts: int, replicas: int) -> World:
        server = start_local_redis(tmp / "redis", args=FAULT_ARGS)
        standin = SlackStandIn(token=BOT_TOKEN).start()
        made = [_host(tmp, n) for n in range(1, hosts + 1)]
        world = cls(tmp, server, RedisFaults(server), standin, made, [],
                    IncidentStore(connect(server.url)))
        config = world.write_config()
        for n in range(replicas):
            serve = ServeProcess(config, server.url, tmp / f"serve{n}.log")
            world.serves.append(serve.start(timeout_s=120))
        return world

    def write_config(self) -> Path:
        path = self.tmp / "bot.yaml"
        path.write_text(json.dumps({
            "http": {"host": "127.0.0.1", "port": 0},
            "hosts": {h.name: {"ssh": f"{h.sim.user}@127.0.0.1:{h.proxy.port}",
                               "key": str(h.sim.key_path),
                               "known_hosts": str(self.tmp / f"{h.name}.known_hosts")}
                      for h in self.hosts},
            "slack": {"channel": CHANNEL, "approvers": ["UALICE"],
                      "api_url": self.standin.api_url},
            "alerts": {"group_wait_s": 0},
            "ssh_defaults": SSH,
            "extra": {"scheduler": {"enabled": False}, "reconcile": RECONCILE,
                      "remediation": REMEDIATION},
        }))
        for h in self.hosts:  # the proxy's address, the host's own key
            key = h.sim.known_hosts_line.split(" ", 1)[1]
            (self.tmp / f"{h.name}.known_hosts").write_text(
                f"[127.0.0.1]:{h.proxy.port} {key}\n")
        return path

    def stop(self) -> None:
        for serve in self.serves:
            serve.stop()
        for h in self.hosts:
            h.proxy.stop()
            h.sim.stop()
        self.redis_faults.close()
        self.store.redis.close()
        self.standin.stop()
        self.redis.stop()

    def audit(self) -> AuditLog:
        return self.store.audit

    def host(self, name: str) -> Host:
        return next(h for h in self.hosts if h.name == name)


def _host(tmp: Path, n: int) -> Host:
    name = f"gpu-{n:02d}"
    sim = start_sim("seed", workdir=tmp / f"sim-{name}")
    proxy = DelayProxy(sim.port).start()
    key = (sim.workdir / "host_ed25519").read_bytes(), \
        (sim.workdir / "host_ed25519.pub").read_text()
    return Host(name, sim, proxy, load_state(sim.workdir), key)
