"""The wait after a claim: the claim's own answer for the next due job (PostgreSQL,
``orm_sqlalchemy._database.next_due``), and what must still end the wait (both databases)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from sqlalchemy import event, text
from sqlalchemy.ext.asyncio import AsyncEngine

from jobs.clock import ManualClock
from jobs.testing import new_request
from orm_sqlalchemy.engine import create_engine
from orm_sqlalchemy.store import SQLAlchemyJobStore
from tests.support import wait_until

from .support import StoreHarness

LEASE_MS = 30_000
FOREVER_MS = 30_000


def traced(engine: AsyncEngine, marker: str) -> list[str]:
    """The statements holding ``marker`` run on ``engine``'s PostgreSQL connections, as
    asyncpg sees them (its query logger)."""
    seen: list[str] = []

    def record(statement: str) -> None:
        if marker in statement:
            seen.append(statement)

    @event.listens_for(engine.sync_engine, "connect")
    def trace(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.driver_connection.add_query_logger(lambda logged: record(logged.query))

    return seen


def next_due_statements(engine: AsyncEngine) -> list[str]:
    return traced(engine, "min(due_at)")


async def logged(seen: list[str]) -> int:
    """How many were traced, once asyncpg ran its query loggers (it calls them soon)."""
    await asyncio.sleep(0)
    return len(seen)


async def settled(store: SQLAlchemyJobStore) -> None:
    """A first wait: LISTEN is up on PostgreSQL, the file's version read on SQLite."""
    await store.wait_for_work(["t"], 60)


@pytest.mark.postgres
async def test_a_wait_after_a_claim_that_took_fewer_jobs_runs_no_statement(
    pg_harness: StoreHarness,
) -> None:
    engine = create_engine(pg_harness.url)
    seen = next_due_statements(engine)
    store = pg_harness.store(engine=engine)
    try:
        await settled(store)
        await store.enqueue(new_request())
        before = await logged(seen)
        assert len(await store.claim(10, LEASE_MS, ["t"])) == 1
        await store.wait_for_work(["t"], 100)
        assert await logged(seen) == before
        assert await store.claim(10, LEASE_MS, ["t"]) == []  # it answers having taken none
        await store.wait_for_work(["t"], 100)
        assert await logged(seen) == before
    finally:
        await store.close()
        await engine.dispose()


@pytest.mark.postgres
async def test_claims_after_one_that_took_all_it_asked_skip_the_next_due_look_up(
    pg_harness: StoreHarness,
) -> None:
    engine = create_engine(pg_harness.url)
    answering = traced(engine, "AS later")
    store = pg_harness.store(engine=engine)
    try:
        await settled(store)
        await store.enqueue_many([new_request() for _ in range(5)])
        assert len(await store.claim(2, LEASE_MS, ["t"])) == 2  # as an idle runner's: answers
        assert await logged(answering) == 1
        assert len(await store.claim(2, LEASE_MS, ["t"])) == 2  # a drain's: plain
        assert len(await store.claim(2, LEASE_MS, ["t"])) == 1
        assert await logged(answering) == 1
        assert await store.claim(2, LEASE_MS, ["t"]) == []  # idle again: answers
        assert await logged(answering) == 2
    finally:
        await store.close()
        await engine.dispose()


async def test_a_wait_after_a_claim_that_took_all_it_asked_still_finds_due_jobs(
    harness: StoreHarness,
) -> None:
    store = harness.store()
    await settled(store)
    for _ in range(2):
        await store.enqueue(new_request())
    assert len(await store.claim(1, LEASE_MS, ["t"])) == 1
    await asyncio.wait_for(store.wait_for_work(["t"], FOREVER_MS), timeout=2)
    assert len(await store.claim(1, LEASE_MS, ["t"])) == 1


async def test_moving_the_clock_between_a_claim_and_the_wait_ends_the_wait(
    harness: StoreHarness,
) -> None:
    clock = ManualClock()
    store = harness.store(clock=clock)
    await settled(store)
    await store.enqueue(new_request())
    await store.enqueue(new_request(delay_ms=5_000))
    assert len(await store.claim(10, LEASE_MS, ["t"])) == 1  # the next due in 5 s
    clock.advance(5_000)
    await asyncio.wait_for(store.wait_for_work(["t"], FOREVER_MS), timeout=2)
    assert len(await store.claim(10, LEASE_MS, ["t"])) == 1


async def test_a_job_enqueued_elsewhere_due_sooner_than_the_claim_said_starts_at_its_time(
    harness: StoreHarness,
) -> None:
    # The stores' own clock; two engines, as two processes would have.
    waiting, enqueuing = harness.store(clock=None), harness.store(clock=None)
    await settled(waiting)
    await enqueuing.enqueue(new_request(delay_ms=10_000))
    claims = 0

    async def idle_runner() -> tuple[list[str], float]:
        nonlocal claims
        while True:
            jobs = await waiting.claim(10, LEASE_MS, ["t"])
            claims += 1
            if jobs:
                return [job.id for job in jobs], time.monotonic()
            await waiting.wait_for_work(["t"], FOREVER_MS)

    runner = asyncio.create_task(idle_runner())
    await wait_until(lambda: claims > 0, message="the runner's first claim")
    await asyncio.sleep(0.1)  # into its wait (of 10 s, what the claim answered)
    assert not runner.done()
    request = new_request(delay_ms=300)
    sent = time.monotonic()
    await enqueuing.enqueue(request)
    claimed, at = await asyncio.wait_for(runner, timeout=5)
    assert claimed == [request.id]
    assert 0.2 <= at - sent < 1.5


@pytest.mark.postgres
async def test_a_job_due_soon_enqueued_while_a_runner_idles_starts_at_its_time(
    pg_harness: StoreHarness,
) -> None:
    """Idle on an empty table (the claim answered "nothing due"), woken by NOTIFY."""
    waiting, enqueuing = pg_harness.store(clock=None), pg_harness.store(clock=None)
    await settled(waiting)
    assert await waiting.claim(10, LEASE_MS, ["t"]) == []
    waiter = asyncio.create_task(waiting.wait_for_work(["t"], FOREVER_MS))
    await asyncio.sleep(0.1)
    request = new_request(delay_ms=300)
    sent = time.monotonic()
    await enqueuing.enqueue(request)
    await asyncio.wait_for(waiter, timeout=5)  # the NOTIFY
    while not (jobs := await waiting.claim(10, LEASE_MS, ["t"])):
        assert time.monotonic() - sent < 5, "the job due in 300 ms was never claimed"
        await waiting.wait_for_work(["t"], FOREVER_MS)
    assert [job.id for job in jobs] == [request.id]
    assert 0.2 <= time.monotonic() - sent < 1.5


@pytest.mark.postgres
async def test_a_due_job_the_claim_skipped_as_locked_ends_the_wait_after_it(
    pg_harness: StoreHarness,
) -> None:
    store = pg_harness.store()
    await settled(store)
    held, free = new_request(), new_request()
    for request in (held, free):
        await store.enqueue(request)
    locker = create_engine(pg_harness.url)
    try:
        async with locker.begin() as conn:  # another claimer's transaction, still open
            await conn.execute(
                text(f'SELECT 1 FROM "{pg_harness.table}" WHERE id = :id FOR UPDATE'),
                {"id": held.id},
            )
            assert [job.id for job in await store.claim(10, LEASE_MS, ["t"])] == [free.id]
            await asyncio.wait_for(store.wait_for_work(["t"], FOREVER_MS), timeout=2)
    finally:
        await locker.dispose()
    assert [job.id for job in await store.claim(10, LEASE_MS, ["t"])] == [held.id]
