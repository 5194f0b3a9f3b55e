"""``build_leader``: settings to jobs; a digest slot posts once with its chart attached."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from bot.chat.base import ChatMessage, Ephemeral, MessageRef
from bot.config.settings import Settings, SlackSettings
from bot.core.errors import ConfigError
from bot.schedule.leader import Firing
from bot.schedule.wiring import build_leader, lifespan_hooks
from storage.stores import Stores


class Recorder:
    def __init__(self) -> None:
        self.posts: list[tuple[str, ChatMessage]] = []
        self.uploads: list[tuple[MessageRef, Path, str]] = []

    def post(
        self, channel: str, message: ChatMessage, thread: MessageRef | None = None
    ) -> MessageRef:
        self.posts.append((channel, message))
        return MessageRef(channel, f"{len(self.posts)}.0")

    def update(self, ref: MessageRef, message: ChatMessage) -> None:
        raise AssertionError("the scheduler never edits")

    def ephemeral(self, note: Ephemeral) -> None:
        raise AssertionError("the scheduler never sends ephemerals")

    def upload(self, ref: MessageRef, path: Path, title: str) -> None:
        self.uploads.append((ref, path, title))


def settings(**extra: object) -> Settings:
    base: dict[str, object] = {
        "digest": {"schedules": [{"cron": "0 8 * * *"}]},
        "escalation": {"after_minutes": 10},
    }
    base.update(extra)
    return Settings(slack=SlackSettings(channel="C0INC", escalation_channel="C0ESC"), extra=base)


def test_jobs_from_settings_and_a_digest_slot_posts_once(stores: Stores, tmp_path: Path) -> None:
    chat = Recorder()
    expired: list[Firing] = []
    sched = build_leader(
        settings(), stores, chat, extra_jobs={"approval_expiry": expired.append}, out_dir=tmp_path
    )
    assert sched is not None
    names = {j.name for j in sched.jobs}
    assert names == {"approval_expiry", "escalation", "digest:C0INC@0_8_*_*_*"}
    digest = next(j for j in sched.jobs if j.name.startswith("digest:"))
    sched._leading = True  # as if it held the lease; the claim still guards the slot
    at = datetime(2024, 5, 2, 8, 0, 3, tzinfo=UTC).timestamp()
    assert sched.fire(digest, at) is True
    assert sched.fire(digest, at + 30) is False  # same slot (08:00), already posted
    assert [c for c, _ in chat.posts] == ["C0INC"]
    assert chat.posts[0][1].header == "Health digest · 2024-05-01 08:00 → 2024-05-02 08:00 UTC"
    (ref, path, title) = chat.uploads[0]
    assert ref.channel == "C0INC" and path.exists() and path.parent == tmp_path
    assert title.startswith("GPU memory vs utilisation")


def test_switched_off_and_hooks(stores: Stores) -> None:
    assert build_leader(settings(scheduler={"enabled": False}), stores, Recorder()) is None
    assert lifespan_hooks(None) == ([], [])


@pytest.mark.parametrize(
    ("extra", "key"),
    [
        ({"digest": {"schedules": [{"cron": "0 25 * * *"}]}}, "extra.digest.schedules.0.cron"),
        (
            {"scheduler": {"jobs": {"sampling": {"cron": "nope"}}}},
            "extra.scheduler.jobs.sampling.cron",
        ),
        ({"scheduler": {"jobs": {"backup": {"every_s": 5}}}}, "extra.scheduler.jobs"),
        ({"scheduler": {"lease_ttl_s": 5, "renew_s": 5}}, "extra.scheduler"),
        ({"escalation": {"usergroup": "oncall"}}, "extra.escalation.usergroup"),
    ],
)
def test_bad_schedule_config_is_one_line_naming_the_key(
    stores: Stores, extra: dict[str, object], key: str
) -> None:
    with pytest.raises(ConfigError) as err:
        build_leader(settings(**extra), stores, Recorder())
    assert f"key '{key}" in err.value.message and "\n" not in err.value.message
    assert err.value.exit_code == 2
