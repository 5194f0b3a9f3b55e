"""Maintenance windows on a real redis-server: stored once, read by every ingest in the
same MGET, the alert inside one recorded in the audit stream and never an incident."""

from __future__ import annotations

from redis import Redis

from bot.domain.incident import Alert
from bot.domain.maintenance import MaintenanceWindow
from bot.domain.windows import parse_window
from storage.audit import AuditLog
from storage.events import IncidentEvents
from storage.incidents import IncidentStore
from storage.silences import SilenceStore

ALWAYS = MaintenanceWindow("gpu-0*", ("vram_idle",), parse_window("daily 00:00-24:00 UTC"),
                           "rack move")


def test_an_alert_inside_a_window_is_audited_not_opened(redis: Redis) -> None:
    silences = SilenceStore(redis)
    assert silences.set_maintenance([ALWAYS], "config")
    assert not silences.set_maintenance([ALWAYS], "config")  # unchanged: no second entry
    assert silences.maintenance() == (ALWAYS,)
    store = IncidentStore(redis, group_wait_s=0)
    result = store.ingest([Alert("agent", "gpu-01", "vram_idle", summary="held idle"),
                           Alert("agent", "gpu-01", "disk_full"),
                           Alert("agent", "cpu-01", "vram_idle")])
    assert [o.value for o, _ in result.outcomes] == ["silenced", "created", "created"]
    assert IncidentEvents(redis).count("incident.opened") == 2
    actions = [e.action for e in AuditLog(redis).recent()]
    assert actions.count("maintenance.set") == 1
    (entry,) = [e for e in AuditLog(redis).recent() if e.action == "alert.suppressed"]
    assert entry.detail["host"] == "gpu-01" and entry.detail["reason"] == "rack move"
    assert entry.detail["window"] == "daily 00:00-24:00 UTC"
    assert not redis.exists("ib:audit:")  # no stream for "no incident"


def test_clearing_the_windows_posts_again(redis: Redis) -> None:
    silences = SilenceStore(redis)
    silences.set_maintenance([ALWAYS], "config")
    assert silences.set_maintenance([], "config")
    result = IncidentStore(redis, group_wait_s=0).ingest([Alert("agent", "gpu-01",
                                                                "vram_idle")])
    assert [o.value for o, _ in result.outcomes] == ["created"]
