"""The relay hands over a claimed batch in one publish and one mark, on both databases."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from typing import Any

import pytest

from jobs import JobOutboxPublisher, ManualClock, OutboxRelay
from jobs.spi import OutboxEntry
from tests.integration.outbox.test_relay import App
from tests.support import wait_until

LEASE_MS = 30_000


class Recording:
    """Delegates to a store or publisher and records the calls made to it, by name."""

    def __init__(self, target: Any) -> None:
        self.target = target
        self.calls: list[str] = []

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self.target, name)
        if not callable(attribute):
            return attribute

        def record(*args: Any, **kwargs: Any) -> Any:
            self.calls.append(name)
            return attribute(*args, **kwargs)

        return record


@pytest.fixture
async def app(harness: Any) -> AsyncIterator[App]:
    application = App(harness, ManualClock())
    await application.setup()
    yield application
    await application.close()


async def _append(app: App, count: int, start: int = 0) -> None:
    async with app.tm.transaction():
        for n in range(start, start + count):
            await app.outbox.append("order.placed", {"n": n})


async def test_mark_published_many_marks_only_entries_whose_lease_holds(app: App) -> None:
    await _append(app, 3)
    first, second, third = await app.outbox.claim(3, LEASE_MS)
    forged = OutboxEntry(**{**_fields(second), "lease_token": "1:forged"})
    marked = await app.outbox.mark_published_many([first, forged, third])
    assert sorted(marked) == sorted([first.id, third.id])
    assert await app.outbox.mark_published_many([first]) == []  # once
    assert await app.outbox.mark_published_many([]) == []
    app.outbox_clock.advance(LEASE_MS)
    assert [entry.id for entry in await app.outbox.claim(10, LEASE_MS)] == [second.id]


async def test_a_batch_is_one_enqueue_many_and_one_mark(app: App) -> None:
    await _append(app, 40)
    store = Recording(app.outbox)
    publisher = Recording(JobOutboxPublisher(app.queue))
    relay = OutboxRelay(store, publisher, batch_size=40)  # type: ignore[arg-type]
    assert await relay.relay_once() == 40
    assert publisher.calls == ["publish_many"]
    assert store.calls == ["claim", "mark_published_many"]
    assert relay.stats == {"published": 40, "failed": 0, "pruned": 0}
    assert await app.job_count() == 40
    keys = {job.key for job in await app.jobs.claim(100, LEASE_MS, ["order.placed"])}
    assert len(keys) == 40
    assert all(key is not None and key.startswith("outbox:") for key in keys)


async def test_a_failing_batch_is_published_one_by_one_and_only_the_bad_entry_waits(
    app: App,
) -> None:
    await _append(app, 5)

    class RefusesEntryTwo:
        def __init__(self) -> None:
            self.inner = JobOutboxPublisher(app.queue)

        async def publish_many(self, entries: Sequence[OutboxEntry]) -> None:
            if any(entry.payload == {"n": 2} for entry in entries):
                raise ValueError("entry 2 does not fit")
            await self.inner.publish_many(entries)

        async def publish(self, entry: OutboxEntry) -> None:
            await self.publish_many([entry])

    relay = OutboxRelay(app.outbox, RefusesEntryTwo(), backoff=lambda attempt: 5_000)
    assert await relay.relay_once() == 5
    assert relay.stats == {"published": 4, "failed": 1, "pruned": 0}
    assert await app.job_count() == 4
    app.outbox_clock.advance(5_000)
    [again] = await app.outbox.claim(10, LEASE_MS)
    assert again.payload == {"n": 2}


async def test_a_running_relay_with_claims_ahead_delivers_a_backlog_each_once(app: App) -> None:
    for start in range(0, 500, 100):
        await _append(app, 100, start)
    order: list[int] = []

    class Ordered:
        def __init__(self) -> None:
            self.inner = JobOutboxPublisher(app.queue)

        async def publish_many(self, entries: Sequence[OutboxEntry]) -> None:
            order.extend(entry.payload["n"] for entry in entries)
            await asyncio.sleep(0.01)  # a publish that takes a while: the next claim overlaps
            await self.inner.publish_many(entries)

        async def publish(self, entry: OutboxEntry) -> None:
            await self.publish_many([entry])

    relay = OutboxRelay(app.outbox, Ordered(), batch_size=50, poll_interval_ms=50)
    relay.start()
    try:
        await wait_until(lambda: relay.stats["published"] == 500, timeout=60, message="500")
    finally:
        await relay.close()
    assert await app.job_count() == 500
    assert len(order) == 500
    assert sorted(order) == list(range(500))


class SlowMarks:
    """Delegates to a store; each ``mark_published_many`` waits for ``release`` (or fails with
    ``failure``), and the claims that return entries while a mark waits are counted."""

    def __init__(self, target: Any) -> None:
        self.target = target
        self.release = asyncio.Event()
        self.marking = 0
        self.claims_while_marking = 0
        self.failure: Exception | None = None

    def __getattr__(self, name: str) -> Any:
        return getattr(self.target, name)

    async def claim(self, limit: int, lease_ms: int) -> list[OutboxEntry]:
        entries: list[OutboxEntry] = await self.target.claim(limit, lease_ms)
        if entries and self.marking:
            self.claims_while_marking += 1
        return entries

    async def mark_published_many(self, entries: Sequence[OutboxEntry]) -> list[str]:
        self.marking += 1
        try:
            await self.release.wait()
            if self.failure is not None:
                raise self.failure
            marked: list[str] = await self.target.mark_published_many(entries)
            return marked
        finally:
            self.marking -= 1


async def test_a_running_relay_claims_the_next_batch_while_the_last_one_is_marked(
    app: App,
) -> None:
    store = SlowMarks(app.outbox)
    relay = OutboxRelay(store, JobOutboxPublisher(app.queue), poll_interval_ms=20)  # type: ignore[arg-type]
    await _append(app, 3)
    relay.start()
    try:
        await wait_until(lambda: store.marking == 1, message="the first batch's mark waiting")
        await _append(app, 2, start=3)
        # The next batch is claimed and published while the first mark is still waiting.
        await wait_until(lambda: _has_jobs(app, 5), message="both batches enqueued")
        assert (store.claims_while_marking, relay.stats["published"]) == (1, 0)
        store.release.set()
        await wait_until(lambda: relay.stats["published"] == 5, message="both batches marked")
    finally:
        store.release.set()
        await relay.close()
    assert await app.outbox.claim(10, LEASE_MS) == []


async def test_a_mark_that_fails_leaves_its_entries_to_their_lease_and_each_job_is_stored_once(
    app: App,
) -> None:
    store = SlowMarks(app.outbox)
    store.failure = ConnectionError("the database went away (test)")
    store.release.set()
    relay = OutboxRelay(store, JobOutboxPublisher(app.queue), poll_interval_ms=20)  # type: ignore[arg-type]
    await _append(app, 4)
    relay.start()
    try:
        await wait_until(lambda: _has_jobs(app, 4), message="the batch enqueued")
        await wait_until(lambda: store.marking == 0, message="the mark failed")
        store.failure = None
        app.outbox_clock.advance(LEASE_MS)  # the entries' lease ends: they go again
        await wait_until(lambda: relay.stats["published"] == 4, message="handed over again")
    finally:
        await relay.close()
    assert await app.job_count() == 4  # the repeat was dropped by the job key
    assert await app.outbox.claim(10, LEASE_MS) == []


async def _has_jobs(app: App, count: int) -> bool:
    return await app.job_count() == count


def _fields(entry: OutboxEntry) -> dict[str, Any]:
    return {name: getattr(entry, name) for name in entry.__slots__}
