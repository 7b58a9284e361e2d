"""The outbox for operators (``OutboxOperations``) on SQLite and PostgreSQL: the stats read,
relay presence, listing, showing and retrying entries. Times come from a ManualClock, so ages
and expiries are exact."""

from __future__ import annotations

import pytest

from jobs import InProcessJobDriver, JobOutboxPublisher, JobQueue, OutboxRelay
from jobs.clock import ManualClock
from jobs.spi import OutboxOperations, OutboxStats, RelayRegistration
from orm_sqlalchemy.outbox import SQLAlchemyOutboxStore
from orm_sqlalchemy.transactions import SQLAlchemyTransactionManager
from tests.integration.outbox.conftest import OutboxHarness
from tests.support import wait_until

LEASE_MS = 600_000


async def _store(
    harness: OutboxHarness, clock: ManualClock
) -> tuple[SQLAlchemyTransactionManager, SQLAlchemyOutboxStore]:
    tm = SQLAlchemyTransactionManager(harness.engine())
    store = harness.store(tm, clock=clock)
    await harness.setup(store)
    return tm, store


async def _append(
    tm: SQLAlchemyTransactionManager, store: SQLAlchemyOutboxStore, entry_type: str, n: int
) -> list[str]:
    ids = []
    async with tm.transaction():
        for i in range(n):
            entry_id = await store.append(entry_type, {"n": i})
            assert entry_id is not None
            ids.append(entry_id)
    return ids


async def test_stats_count_waiting_failing_and_recently_published_entries(
    harness: OutboxHarness,
) -> None:
    clock = ManualClock()
    tm, store = await _store(harness, clock)
    assert isinstance(store, OutboxOperations)
    assert await store.outbox_stats() == OutboxStats(
        unpublished=0, oldest_age_ms=None, with_errors=0, published_last_hour=0
    )
    await _append(tm, store, "order.placed", 3)
    clock.advance(4_000)
    await _append(tm, store, "order.placed", 2)
    clock.advance(1_000)
    published, failing, *_ = await store.claim(2, LEASE_MS)
    assert await store.mark_published(published.id, published.lease_token)
    assert await store.release(failing.id, failing.lease_token, delay_ms=60_000, error="boom")
    assert await store.outbox_stats() == OutboxStats(
        unpublished=4, oldest_age_ms=5_000, with_errors=1, published_last_hour=1
    )
    clock.advance(3_600_001)  # the published one is older than an hour now
    stats = await store.outbox_stats()
    assert (stats.unpublished, stats.published_last_hour) == (4, 0)


async def test_relays_are_listed_until_their_registration_expires(harness: OutboxHarness) -> None:
    clock = ManualClock()
    _, store = await _store(harness, clock)
    assert await store.list_relays() == []
    first = RelayRegistration(id="relay-1", host="h1", pid=11)
    await store.register_relay(first, ttl_ms=3_000)
    started = clock.now_ms()
    clock.advance(1_000)
    await store.register_relay(RelayRegistration(id="relay-2", host="h2", pid=22), ttl_ms=3_000)
    await store.register_relay(first, ttl_ms=3_000)  # a refresh keeps started_at
    listed = await store.list_relays()
    assert [(r.id, r.host, r.pid) for r in listed] == [("relay-1", "h1", 11), ("relay-2", "h2", 22)]
    assert int(listed[0].started_at.timestamp() * 1000) == started
    assert int(listed[0].last_seen.timestamp() * 1000) == started + 1_000
    clock.advance(3_000)  # relay-1 refreshed 3 s ago: expired; relay-2 too
    assert await store.list_relays() == []
    await store.register_relay(first, ttl_ms=3_000)
    await store.deregister_relay("relay-1")
    await store.deregister_relay("unknown")
    assert await store.list_relays() == []


async def test_a_running_relay_is_present_and_a_closed_one_is_gone(harness: OutboxHarness) -> None:
    tm = SQLAlchemyTransactionManager(harness.engine())
    store = harness.store(tm)
    await harness.setup(store)
    relay = OutboxRelay(
        store, JobOutboxPublisher(JobQueue(InProcessJobDriver())), presence_interval_ms=100
    )
    relay.start()
    try:
        await wait_until(lambda: relay.presence._registered, message="the relay registered")
        (listed,) = await store.list_relays()
        assert listed.id == relay.presence.registration.id
    finally:
        await relay.close()
    assert await store.list_relays() == []


async def test_entries_are_listed_by_state_shown_and_retried(harness: OutboxHarness) -> None:
    clock = ManualClock()
    tm, store = await _store(harness, clock)
    ids = []
    for _ in range(3):  # one millisecond apart: the listing's order is (created_at, id)
        ids += await _append(tm, store, "order.placed", 1)
        clock.advance(1)
    (other,) = await _append(tm, store, "order.shipped", 1)
    published, failing = await store.claim(2, LEASE_MS)
    assert [published.id, failing.id] == ids[:2]
    assert await store.mark_published(published.id, published.lease_token)
    assert await store.release(failing.id, failing.lease_token, delay_ms=60_000, error="boom")

    everything = await store.list_entries()
    assert [e.id for e in everything.entries] == [*ids, other]
    assert everything.next_cursor is None
    assert [e.id for e in (await store.list_entries(state="unpublished")).entries] == [
        ids[1], ids[2], other,
    ]  # fmt: skip
    assert [e.id for e in (await store.list_entries(state="failing")).entries] == [ids[1]]
    assert [e.id for e in (await store.list_entries(state="published")).entries] == [ids[0]]
    assert [e.id for e in (await store.list_entries(type="order.shipped")).entries] == [other]

    first = await store.list_entries(limit=2)
    assert [e.id for e in first.entries] == ids[:2]
    second = await store.list_entries(limit=2, cursor=first.next_cursor)
    assert [e.id for e in second.entries] == [ids[2], other]
    assert second.next_cursor is None

    shown = await store.get_entry(ids[1])
    assert shown is not None
    assert (shown.state, shown.last_error, shown.attempts, shown.leased) == (
        "failing", "boom", 1, False,
    )  # fmt: skip
    assert shown.payload == {"n": 0}  # each appended alone
    assert await store.get_entry("no-such-entry") is None

    assert await store.claim(10, LEASE_MS) != []  # ids[2] and other, leased now
    assert (await store.get_entry(other)).leased  # type: ignore[union-attr]
    assert await store.claim(10, LEASE_MS) == []  # ids[1] waits 60 s
    assert await store.retry_entry(ids[1])
    assert not await store.retry_entry(ids[0])  # published: left as it is
    assert not await store.retry_entry("no-such-entry")
    (again,) = await store.claim(10, LEASE_MS)
    assert again.id == ids[1]


@pytest.mark.parametrize(("option", "value"), [("state", "lost"), ("limit", 0)])
async def test_a_bad_listing_option_is_refused(
    harness: OutboxHarness, option: str, value: object
) -> None:
    _, store = await _store(harness, ManualClock())
    with pytest.raises(ValueError, match=option):
        await store.list_entries(**{option: value})  # type: ignore[arg-type]
