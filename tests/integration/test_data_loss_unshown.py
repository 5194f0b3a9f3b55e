"""An incident that closed while its card still waited in the chat outbox, then Redis
restarted empty: the data-loss announcement names it (issue 39, chaos seed 4242: gpu-03's
INC-4705 resolved while Slack's channel budget held its card back, a wipe took the card,
and no message ever showed the incident). Real ``redis-server`` (restarted empty), the
assembled flow and its outbox, the Slack stand-in over HTTP; the watch driven directly.

Before: the watch remembered open incidents only; the announcement said nothing was lost.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import pytest
from redis.exceptions import RedisError

from bot.chat.base import ChatMessage
from bot.chat.outbox import CARD
from bot.chat.slack import SlackBackend, make_client
from bot.core import strings
from bot.domain.incident import Alert, AlertStatus
from bot.domain.incident_record import ChatRefs, Running
from bot.flow.assembly import Flow, build_flow
from bot.flow.data_loss import UNSHOWN_KEEP_S, DataLossWatch, Loss
from bot.rig.localredis import LocalRedis, start_local_redis
from bot.rig.slack_standin import SlackStandIn
from bot.ssh.pool import ParamikoPool
from storage.chat_outbox import Op
from storage.connection import connect
from storage.stores import Stores
from tests.fixtures.slack import CHANNEL, slack_test_settings
from tests.helpers.chaos.checker import UNSHOWN_RE

HEAD = strings.DATA_LOSS_HEAD.split(" (")[0]


@dataclass
class Clock:
    now: float

    def __call__(self) -> float:
        return self.now


@dataclass
class Rig:
    server: LocalRedis
    stores: Stores
    flow: Flow
    watch: DataLossWatch
    clock: Clock


@pytest.fixture
def rig(tmp_path: Path, slack_standin: SlackStandIn) -> Iterator[Rig]:
    server = start_local_redis(tmp_path / "redis")  # its own: this test wipes it
    stores = Stores(connect(server.url), connect(server.url, decode=False))
    settings = slack_test_settings(slack_standin)
    pool = ParamikoPool(settings.ssh_defaults)
    flow = build_flow(settings, stores, pool, SlackBackend(make_client(settings, timeout_s=2)))
    clock = Clock(time.time())
    watch = DataLossWatch(stores.epochs(), flow.incidents, flow.audit, flow.publisher,
                          opens=flow.incidents.ingest, clock=clock, chatless_wait_s=0.0,
                          shown_wait_s=1.0)
    watch.start()
    stores.on_incident_written(watch.seen)  # as ``bot/service.py`` wires it
    flow.deliveries.watchers.append(watch.card_out)
    try:
        yield Rig(server, stores, flow, watch, clock)
    finally:
        pool.close()
        stores.close()
        server.stop()


def closed_without_card(rig: Rig, host: str) -> str:
    """An alert opened and resolved (the on-call fixed the host) before any card went out."""
    alert = Alert("alertmanager", host, "vram_idle", fingerprint=f"fp-{host}")
    incident, _ = rig.flow.incidents.open_or_fold(alert)
    rig.flow.incidents.ingest([replace(alert, status=AlertStatus.RESOLVED)])
    closed = rig.flow.incidents.require(incident.id)
    assert not closed.is_open and closed.chat is None, closed
    return incident.id


def wiped(rig: Rig) -> Loss:
    rig.server.wipe()
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        try:
            if (loss := rig.watch.check()) is not None:
                return loss
        except RedisError:  # the clients' first commands meet the restart
            pass
        time.sleep(0.1)
    raise AssertionError("the watch never noticed the wipe")


def test_an_incident_closed_before_its_card_went_out_is_named_when_a_wipe_takes_it(
        rig: Rig, slack_standin: SlackStandIn) -> None:
    # remembered for UNSHOWN_KEEP_S only
    expired = closed_without_card(rig, "gpu-06")
    rig.clock.now += UNSHOWN_KEEP_S + 1
    # its card went out through this process's outbox: told, forgotten
    delivered = closed_without_card(rig, "gpu-04")
    card = ChatMessage(text="gpu-04: card", header=f"incident {delivered}: card",
                       incident_id=delivered)
    assert rig.flow.outbox.send(delivered, CARD, Op.POST, card, CHANNEL) is not None
    assert rig.flow.incidents.require(delivered).chat is not None
    # another replica delivered its card (this process is not told): the period's check
    # reads it back
    elsewhere = closed_without_card(rig, "gpu-05")
    peer = Stores(connect(rig.server.url), connect(rig.server.url, decode=False)).incidents()
    peer.update(elsewhere, lambda i: replace(i, chat=ChatRefs(CHANNEL, "1.5", "1.5")))
    assert rig.watch.check() is None
    # INC-4705's case, and an open incident beside it
    unshown = closed_without_card(rig, "gpu-03")
    still_open, _ = rig.flow.incidents.open_or_fold(
        Alert("alertmanager", "gpu-07", "vram_idle", fingerprint="fp-gpu-07"))

    loss = wiped(rig)
    assert loss.announced
    assert [i.id for i in loss.unshown] == [unshown]
    assert [i.id for i in loss.lost] == [still_open.id]
    assert unshown not in loss.reopened, "closed: its state is final, nothing re-opened"
    rig.flow.outbox.drain_once(time.time() + 60)  # sent at once unless Slack refused it
    (said,) = [m for m in slack_standin.top_level(CHANNEL) if HEAD in str(m.get("text"))]
    text = str(said["text"])
    line = strings.DATA_LOSS_UNSHOWN_LINE.format(id=unshown, host="gpu-03", kind="vram_idle",
                                                 state="resolved")
    assert line in text, text
    assert UNSHOWN_RE.findall(text) == [unshown]  # what the chaos checker counts as shown
    assert still_open.id in text
    assert not any(i in text for i in (expired, delivered, elsewhere)), text
    # the next period finds nothing to say again
    assert rig.watch.check() is None and not rig.watch.unshown


def test_an_incident_whose_alert_resolved_after_its_card_went_out_is_not_named(
        rig: Rig) -> None:
    """The chaos run's seed 4242 at a2f08cc (gpu-07 INC-291): its card was out, the on-call
    denied, then its alert resolved. The ingest closing it tells the watch a record built
    from its view of the incident, which did not read the message: the watch took it for
    one closed before its message went out, and the announcement named it, a second
    message. The ingest's view now reads ``chat`` too."""
    alert = Alert("alertmanager", "gpu-02", "vram_idle", fingerprint="fp-gpu-02")
    incident, _ = rig.flow.incidents.open_or_fold(alert)
    card = ChatMessage(text="gpu-02: card", header=f"incident {incident.id}: card",
                       incident_id=incident.id)
    assert rig.flow.outbox.send(incident.id, CARD, Op.POST, card, CHANNEL) is not None
    assert rig.flow.incidents.require(incident.id).chat is not None
    rig.flow.incidents.ingest([replace(alert, status=AlertStatus.RESOLVED)])
    assert not rig.flow.incidents.require(incident.id).is_open
    assert incident.id not in rig.watch.unshown
    loss = wiped(rig)
    assert loss.unshown == ()


def test_a_replica_that_alone_saw_it_close_names_it_when_another_announces(
        rig: Rig, slack_standin: SlackStandIn) -> None:
    """The chaos run's seed 4242 at a2f08cc (INC-312): it closed with its card queued, on the
    replica that committed the close; a wipe took both, and the replica that won the
    announcement had never seen it close: no message ever showed it. The replica that saw
    it names it in a message of its own; one both saw is named once."""
    peer_stores = Stores(connect(rig.server.url), connect(rig.server.url, decode=False))
    peer = DataLossWatch(peer_stores.epochs(), peer_stores.incidents(), rig.flow.audit,
                         rig.flow.publisher, opens=peer_stores.incidents().ingest,
                         clock=rig.clock, chatless_wait_s=0.0)
    peer.start()
    peer_stores.on_incident_written(peer.seen)
    try:
        alone = Alert("alertmanager", "gpu-03", "vram_idle", fingerprint="fp-gpu-03")
        incident, _ = peer_stores.incidents().open_or_fold(alone)
        peer_stores.incidents().ingest([replace(alone, status=AlertStatus.RESOLVED)])
        both = closed_without_card(rig, "gpu-04")  # this one's close, told to both below
        peer.seen(rig.flow.incidents.require(both))
        assert incident.id in peer.unshown and incident.id not in rig.watch.unshown

        loss = wiped(rig)  # this replica notices first and announces
        assert loss.announced and [i.id for i in loss.unshown] == [both]
        late = peer.check()
        assert late is not None and not late.announced
        assert [i.id for i in late.unshown] == [incident.id]  # ``both`` was named already
        rig.flow.outbox.drain_once(time.time() + 60)
        rig.flow.outbox.drain_once(time.time() + 120)
        texts = [str(m.get("text")) for m in slack_standin.top_level(CHANNEL)]
        named = [i for t in texts for i in UNSHOWN_RE.findall(t)]
        assert sorted(named) == sorted([incident.id, both]), texts  # each once
        (also,) = [t for t in texts if incident.id in t]
        assert also.startswith(strings.DATA_LOSS_ALSO) and HEAD not in also
        assert peer.check() is None  # nothing to say again
    finally:
        peer_stores.close()


def test_a_repeat_of_the_alert_leaves_what_the_watch_knew_of_the_incident(rig: Rig) -> None:
    """An ingest's fold reads a few fields of the incident (``CORE_FIELDS``) and tells the
    watch that record: it replaced the whole one, so a wipe after Alertmanager's repeat
    re-opened the incident without its summary and labels, and the announcement no longer
    said which action had been sent to the host. The fold's fields now go over what the
    watch knew."""
    alert = Alert("alertmanager", "gpu-08", "vram_idle", summary="VRAM held at 0% on gpu-08",
                  labels={"alertname": "GpuMemoryHeldIdle", "team": "ml"},
                  fingerprint="fp-gpu-08")
    incident, _ = rig.flow.incidents.open_or_fold(alert)
    running = Running("systemd.stop_disable", "UALICE", time.time(), "appr-1")
    rig.flow.incidents.update(incident.id, lambda i: replace(i, running=running))
    rig.flow.incidents.ingest([alert])  # Alertmanager's repeat: folded, count 2
    known = rig.watch.open[incident.id]
    assert known.count == 2, "the fold's own fields are taken"
    assert known.running == running and known.summary == alert.summary
    assert known.labels == alert.labels

    loss = wiped(rig)
    (lost,) = loss.lost
    assert lost.running == running and lost.count == 2
    new = rig.flow.incidents.require(loss.reopened[incident.id])
    assert new.summary == alert.summary and new.labels == alert.labels


def test_an_alert_during_the_watchs_reopen_folds_into_it(
        tmp_path: Path, slack_standin: SlackStandIn) -> None:
    """Chaos seed 4242 at a2f08cc (INC-5837 → INC-5840): the epoch poller found the wipe and
    re-opened what its replica knew, waiting first for the peer that might know a lost
    incident's message; Alertmanager's repeat reached that replica meanwhile, passed the
    ingest's epoch read (the poller had already joined the new epoch), and opened the lost
    incident anew: a second card, and the re-open folded into it. Ingests now wait while
    the watch re-opens, whichever thread found the loss."""
    server = start_local_redis(tmp_path / "redis")
    stores = Stores(connect(server.url), connect(server.url, decode=False))
    flow = build_flow(slack_test_settings(slack_standin), stores,
                      pool := ParamikoPool(slack_test_settings(slack_standin).ssh_defaults),
                      SlackBackend(make_client(slack_test_settings(slack_standin), timeout_s=2)))
    watch = DataLossWatch(stores.epochs(), flow.incidents, flow.audit, flow.publisher,
                          opens=flow.incidents.ingest, chatless_wait_s=1.0)
    watch.start()
    stores.on_incident_written(watch.seen)
    stores.before_incident_ingest(watch.current)  # as ``bot/service.py`` wires both
    try:
        alert = Alert("alertmanager", "gpu-09", "vram_idle", fingerprint="fp-gpu-09")
        lost, _ = flow.incidents.open_or_fold(alert)
        assert flow.incidents.require(lost.id).chat is None  # its card not out yet
        server.wipe()
        found: list[Loss | None] = []
        poller = threading.Thread(target=lambda: found.append(_checked(watch)))
        poller.start()  # the epoch poller: it waits chatless_wait_s before this re-open
        assert wait_for(lambda: watch.moved() is False and watch.epoch is not None, 10)
        flow.incidents.ingest([alert])  # Alertmanager's repeat, meanwhile
        poller.join(15)
        (loss,) = found
        assert loss is not None and lost.id in loss.reopened, loss  # created by the re-open
        new = flow.incidents.require(loss.reopened[lost.id])
        assert new.count == 2 and new.lost_card is not None  # the repeat folded into it
        assert [i.id for i in flow.incidents.list(open_only=True)] == [new.id]
    finally:
        pool.close()
        stores.close()
        server.stop()


def _checked(watch: DataLossWatch) -> Loss | None:
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        try:
            return watch.check()
        except RedisError:  # the clients' first commands meet the restart
            time.sleep(0.1)
    raise AssertionError("the watch never got an answer from Redis")


def wait_for(check: Callable[[], bool], timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if check():
                return True
        except RedisError:
            pass
        time.sleep(0.02)
    return False


def test_a_card_another_replica_delivered_just_before_the_wipe_is_not_named(
        rig: Rig, slack_standin: SlackStandIn) -> None:
    """Chaos seed 4242 at 59b746e (gpu-01, INC-296): one replica committed the close while
    the card was queued; the other replica's outbox delivered the card half a second
    before a wipe, which took the record of it; the announcement named INC-296 as closed
    before its message went out, a second message and a false one. Each replica pools the
    cards it delivered as it notices the loss; the one naming waits a poll for them."""
    peer_stores = Stores(connect(rig.server.url), connect(rig.server.url, decode=False))
    peer = DataLossWatch(peer_stores.epochs(), peer_stores.incidents(), rig.flow.audit,
                         rig.flow.publisher, opens=peer_stores.incidents().ingest,
                         clock=rig.clock, chatless_wait_s=0.0, shown_wait_s=1.0)
    peer.start()
    try:
        delivered_elsewhere = closed_without_card(rig, "gpu-01")
        peer.card_out(delivered_elsewhere)  # the peer's outbox posted it; no record kept it
        never_out = closed_without_card(rig, "gpu-02")
        assert {delivered_elsewhere, never_out} <= set(rig.watch.unshown)
        found: list[Loss] = []
        announcer = threading.Thread(target=lambda: found.append(wiped(rig)))
        announcer.start()  # this replica notices first and waits for the peer's pool
        assert wait_for(lambda: not rig.watch.moved(), 10)
        assert peer.check() is not None  # the peer notices within its poll
        announcer.join(15)
        (loss,) = found
        assert loss.announced and [i.id for i in loss.unshown] == [never_out]
        rig.flow.outbox.drain_once(time.time() + 60)
        texts = [str(m.get("text")) for m in slack_standin.top_level(CHANNEL)]
        named = [i for t in texts for i in UNSHOWN_RE.findall(t)]
        assert named == [never_out], texts
    finally:
        peer_stores.close()

