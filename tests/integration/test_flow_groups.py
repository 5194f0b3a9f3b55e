"""A rack reboot: hosts alerting together share one channel message, and each host is still
diagnosed, with its own buttons, in that message's thread."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from redis import Redis

from bot.config.settings import Settings
from bot.demo.story import make_desk
from bot.domain.incident import Alert
from bot.domain.lifecycle import IncidentState
from bot.flow.assembly import build_flow
from bot.flow.consumer import GROUP
from bot.sim.sshd import SimHost
from bot.ssh.pool import ParamikoPool
from storage.stores import open_stores
from tests.helpers.chat import RecordingChat

UNIT = "vllm-kimi-k25-int4.service"


def test_second_host_is_diagnosed_in_the_parents_thread(
        redis: Redis, redis_url: str, sim_factory: Callable[..., SimHost]) -> None:
    sims = {"gpu-01": sim_factory("seed"), "gpu-02": sim_factory("seed")}
    settings = Settings.model_validate({
        "redis_url": redis_url, "alerts": {"group_wait_s": 60},
        "hosts": {name: {"ssh": s.target, "key": str(s.key_path),
                         "known_hosts": str(s.known_hosts_path)} for name, s in sims.items()},
        "slack": {"channel": "C0RACK", "approvers": ["UONCALL"]},
        "extra": {"remediation": {"settle_s": 0.3}}})
    chat = RecordingChat()
    pool = ParamikoPool(settings.ssh_defaults)
    ctx = build_flow(settings, open_stores(settings.redis_url), pool, chat)
    try:
        for host in sims:
            ctx.incidents.open_or_fold(Alert(source="test", host=host, kind="vm_restart"))
        ctx.events.ensure_group(GROUP)
        consumer = ctx.consumer()
        while consumer.run_once(block_ms=None):
            pass
        check_posts(chat, ctx)
        child = next(i for i in ctx.incidents.list(open_only=True) if i.host == "gpu-02")
        approval = next(p["approval_id"] for p in child.parts_to_dict()["plans"]
                        if p["action"]["kind"] == "systemd.stop_disable")
        assert make_desk(ctx).approve(approval, "UONCALL").acted
        consumer.drain()  # the click event the desk queued
        assert stopped(sims["gpu-02"]) and not stopped(sims["gpu-01"])
        assert ctx.incidents.require(child.id).state is IncidentState.VERIFIED
    finally:
        pool.close()


def check_posts(chat: RecordingChat, ctx: Any) -> None:
    top = [p for p in chat.posts if p[2] is None]
    assert len(top) == 1, "one channel message for the group"
    parent_ref = top[0][3]
    in_thread = [p for p in chat.posts if p[2] == parent_ref]
    assert any("gpu-02" in (m.header or m.text) for _, m, _, _ in in_thread)
    parent = next(i for i in ctx.incidents.list(open_only=True) if i.host == "gpu-01")
    assert set(parent.hosts) == {"gpu-01", "gpu-02"}


def stopped(sim: SimHost) -> bool:
    return any(e.get("tool") == "systemctl" and e["argv"][:2] == ["stop", UNIT]
               for e in sim.command_log())
