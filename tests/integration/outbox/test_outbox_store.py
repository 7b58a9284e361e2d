"""SQLAlchemyOutboxStore: append in the caller's transaction, leased claims, fencing, pruning."""

from __future__ import annotations

import asyncio

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from sqlalchemy import Column, MetaData, Table, inspect, text

from jobs.clock import ManualClock
from jobs.errors import (
    DriverError,
    JobTypeError,
    PayloadError,
    PayloadTooLargeError,
    StoreSchemaError,
)
from jobs.spi import OutboxEntry, OutboxStore
from jobs.telemetry import parse_traceparent
from orm_sqlalchemy import outbox as outbox_module
from orm_sqlalchemy.engine import create_engine
from orm_sqlalchemy.outbox import SQLAlchemyOutboxStore
from orm_sqlalchemy.tables import outbox_schema
from orm_sqlalchemy.transactions import SQLAlchemyTransactionManager
from tests.integration.outbox.conftest import OutboxHarness

LONG_LEASE_MS = 600_000


async def _store(
    harness: OutboxHarness, clock: ManualClock | None = None
) -> tuple[SQLAlchemyTransactionManager, SQLAlchemyOutboxStore]:
    tm = SQLAlchemyTransactionManager(harness.engine())
    store = harness.store(tm, clock=clock)
    await harness.setup(store)
    return tm, store


async def _append(tm: SQLAlchemyTransactionManager, store: SQLAlchemyOutboxStore, n: int) -> None:
    async with tm.transaction():
        for i in range(n):
            await store.append("order.placed", {"n": i})


async def test_store_implements_the_spi_and_exposes_its_schema(harness: OutboxHarness) -> None:
    tm, store = await _store(harness)
    assert isinstance(store, OutboxStore)
    assert store.table_name == f"{harness.prefix}entries"
    assert store.table_name in store.metadata.tables
    await store.create_schema()  # idempotent
    async with tm.engine.connect() as conn:
        names = await conn.run_sync(lambda c: inspect(c).get_table_names())
    assert store.table_name in names


async def test_schema_is_created_on_first_use_and_survives_a_rolled_back_first_use(
    harness: OutboxHarness,
) -> None:
    tm = SQLAlchemyTransactionManager(harness.engine())
    store = harness.store(tm)

    async def first_use_rolled_back() -> None:
        async with tm.transaction():
            await store.append("t", {})
            raise RuntimeError("roll back the first use, table and all")

    with pytest.raises(RuntimeError):
        await first_use_rolled_back()
    await _append(tm, store, 1)
    claimed = await store.claim(10, LONG_LEASE_MS)
    assert len(claimed) == 1
    fresh = harness.store(SQLAlchemyTransactionManager(harness.engine()))
    assert await fresh.claim(10, LONG_LEASE_MS) == []  # a claim may create it too


async def test_append_round_trips_payload_key_and_delay(harness: OutboxHarness) -> None:
    tm, store = await _store(harness)
    payload = {
        "nul": "a\u0000b",
        "unicode": "zaż\u00f3\u0142\u0107 \U0001f680",
        "deep": [[[[{"x": [1, 2.5, None, True]}]]]],
        "quotes": "'\"; DROP TABLE x; --",
    }
    async with tm.transaction():
        entry_id = await store.append("order.placed", payload, key="order:1", delay_ms=250)
    [entry] = await store.claim(10, LONG_LEASE_MS)
    assert isinstance(entry, OutboxEntry)
    assert entry.id == entry_id
    assert entry.type == "order.placed"
    assert entry.payload == payload
    assert entry.key == "order:1"
    assert entry.delay_ms == 250
    assert entry.attempts == 1
    assert entry.created_at.tzinfo is not None


async def test_append_keeps_the_callers_trace_context(
    harness: OutboxHarness, span_exporter: InMemorySpanExporter
) -> None:
    tm, store = await _store(harness)
    with trace.get_tracer("test").start_as_current_span("POST /orders") as span:
        async with tm.transaction():
            await store.append("order.placed", {"n": 1})
    async with tm.transaction():
        await store.append("order.placed", {"n": 2})  # outside any span
    entries = sorted(await store.claim(10, LONG_LEASE_MS), key=lambda e: e.payload["n"])
    context = span.get_span_context()
    stored = parse_traceparent(entries[0].trace_context)
    assert stored is not None
    assert (stored.trace_id, stored.span_id) == (context.trace_id, context.span_id)
    assert entries[1].trace_context is None


async def _older_table(harness: OutboxHarness, *missing: str) -> SQLAlchemyTransactionManager:
    """The outbox table of an earlier version, without the ``missing`` columns."""
    old = MetaData()
    current = outbox_schema(harness.prefix).entries
    columns = [
        Column(c.name, c.type, primary_key=c.primary_key, nullable=c.nullable)
        for c in current.columns
        if c.name not in missing
    ]
    Table(current.name, old, *columns)
    engine = harness.engine()
    async with engine.begin() as conn:
        await conn.run_sync(old.create_all)
    return SQLAlchemyTransactionManager(engine)


async def test_a_table_of_an_older_version_gets_the_columns_it_lacks(
    harness: OutboxHarness,
) -> None:
    tm = await _older_table(harness, "trace_context", "run_at", "max_attempts")
    store = harness.store(tm)
    async with tm.transaction():
        await store.append("order.placed", {"n": 1}, delay_ms=5_000, max_attempts=4)
    [entry] = await store.claim(10, 30_000)
    assert (entry.max_attempts, entry.delay_ms) == (4, 5_000)
    assert entry.run_at_ms is not None


async def test_a_table_lacking_a_column_that_cannot_be_added_is_refused_naming_it(
    harness: OutboxHarness,
) -> None:
    tm = await _older_table(harness, "available_at")  # NOT NULL, no default: a migration
    store = harness.store(tm)
    with pytest.raises(StoreSchemaError, match=r"has no column 'available_at'.*outbox store"):
        await store.create_schema()
    with pytest.raises(StoreSchemaError, match="available_at"):
        async with tm.transaction():
            await store.append("order.placed", {})


async def test_non_json_payload_fails_naming_the_path_with_nothing_written(
    harness: OutboxHarness,
) -> None:
    tm, store = await _store(harness)
    async with tm.transaction():
        with pytest.raises(PayloadError, match=r'payload\["items"\]\[1\]: set is not JSON') as info:
            await store.append("order.placed", {"items": [1, {2}]})
        assert info.value.path == 'payload["items"][1]'
        with pytest.raises(JobTypeError):
            await store.append("", {})
        with pytest.raises(JobTypeError):
            await store.append("t", {}, key="bad\u0000key")
        with pytest.raises(PayloadTooLargeError):
            await store.append("t", {"big": "x" * (1024 * 1024)})
        with pytest.raises(ValueError, match="delay_ms"):
            await store.append("t", {}, delay_ms=-1)
    assert await harness.count() == 0


async def test_claim_takes_only_unpublished_free_entries_oldest_first(
    harness: OutboxHarness,
) -> None:
    clock = ManualClock(1_000_000)
    tm, store = await _store(harness, clock)
    for i in range(3):
        async with tm.transaction():
            await store.append("t", {"n": i})
        clock.advance(10)
    first = await store.claim(2, LONG_LEASE_MS)
    assert [e.payload["n"] for e in first] == [0, 1]
    second = await store.claim(10, LONG_LEASE_MS)
    assert [e.payload["n"] for e in second] == [2]
    assert await store.claim(10, LONG_LEASE_MS) == []
    assert await store.claim(0, LONG_LEASE_MS) == []


@pytest.mark.postgres
async def test_out_of_order_commits_are_still_claimed(postgres_harness: OutboxHarness) -> None:
    """An entry created first but committed last is not skipped (no 'id > last seen').

    PostgreSQL only: SQLite has one writer, so its transactions cannot interleave.
    """
    tm, store = await _store(postgres_harness)
    early_open, late_done = asyncio.Event(), asyncio.Event()

    async def early() -> None:
        async with tm.transaction():
            await store.append("t", {"which": "early"})
            early_open.set()
            await late_done.wait()

    async def late() -> None:
        await early_open.wait()
        async with tm.transaction():
            await store.append("t", {"which": "late"})

    task = asyncio.create_task(early())
    await late()
    assert [e.payload for e in await store.claim(10, LONG_LEASE_MS)] == [{"which": "late"}]
    late_done.set()
    await task
    assert [e.payload for e in await store.claim(10, LONG_LEASE_MS)] == [{"which": "early"}]


async def test_mark_and_release_are_fenced_by_the_lease_token(harness: OutboxHarness) -> None:
    clock = ManualClock(1_000_000)
    tm, store = await _store(harness, clock)
    await _append(tm, store, 1)
    [first] = await store.claim(1, 1_000)
    assert first.lease_token.startswith("1:")

    assert not await store.mark_published(first.id, "1:forged")
    assert not await store.release(first.id, "1:forged", delay_ms=0, error="x")
    assert not await store.mark_published("no-such-entry", first.lease_token)

    assert await store.release(first.id, first.lease_token, delay_ms=500, error="broker\u0000down")
    assert not await store.mark_published(first.id, first.lease_token)  # released: stale
    assert await store.claim(1, 1_000) == []  # not before its delay
    clock.advance(500)
    [second] = await store.claim(1, 1_000)
    assert second.id == first.id
    assert second.attempts == 2
    assert second.lease_token != first.lease_token
    assert second.lease_token.startswith("2:")

    assert not await store.release(second.id, first.lease_token, delay_ms=0, error="stale")
    assert await store.mark_published(second.id, second.lease_token)
    assert not await store.mark_published(second.id, second.lease_token)  # once
    assert not await store.release(second.id, second.lease_token, delay_ms=0, error="late")
    clock.advance(LONG_LEASE_MS)
    assert await store.claim(10, 1_000) == []  # published entries are never claimed
    assert await harness.count(where="WHERE last_error = 'broker\\u0000down'") == 1


async def test_an_expired_lease_makes_the_entry_claimable_again(harness: OutboxHarness) -> None:
    clock = ManualClock(1_000_000)
    tm, store = await _store(harness, clock)
    await _append(tm, store, 1)
    [first] = await store.claim(10, 1_000)
    clock.advance(999)
    assert await store.claim(10, 1_000) == []
    clock.advance(1)
    [again] = await store.claim(10, 1_000)
    assert (again.id, again.attempts) == (first.id, 2)
    # The first holder lost the entry: its late mark is refused, the new holder's is not.
    assert not await store.mark_published(first.id, first.lease_token)
    assert await store.mark_published(again.id, again.lease_token)


async def test_prune_deletes_only_published_entries_older_than_the_cutoff(
    harness: OutboxHarness,
) -> None:
    clock = ManualClock(1_000_000)
    tm, store = await _store(harness, clock)
    await _append(tm, store, 3)
    a, b, _unpublished = await store.claim(3, LONG_LEASE_MS)
    assert await store.mark_published(a.id, a.lease_token)
    clock.advance(5_000)
    assert await store.mark_published(b.id, b.lease_token)
    clock.advance(1_000)
    assert await store.prune(2_000) == 1  # a, published 6 s ago
    assert await store.prune(2_000) == 0
    assert await harness.count() == 2


async def test_prune_deletes_a_bounded_batch_a_call_oldest_first(
    harness: OutboxHarness, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(outbox_module, "PRUNE_BATCH", 2)
    clock = ManualClock(1_000_000)
    tm, store = await _store(harness, clock)
    await _append(tm, store, 5)
    for entry in await store.claim(5, LONG_LEASE_MS):
        assert await store.mark_published(entry.id, entry.lease_token)
        clock.advance(10)
    clock.advance(5_000)
    assert [await store.prune(1_000) for _ in range(4)] == [2, 2, 1, 0]
    assert await harness.count() == 0
    with pytest.raises(ValueError, match="older_than_ms must not be negative"):
        await store.prune(-1)


async def test_concurrent_claimers_on_separate_engines_never_share_an_entry(
    harness: OutboxHarness,
) -> None:
    await _concurrent_claims(harness, 1_000, claimers=4)


async def _concurrent_claims(harness: OutboxHarness, entries: int, claimers: int) -> None:
    tm, writer = await _store(harness)
    await _append(tm, writer, entries)
    stores = [harness.store() for _ in range(claimers)]
    claimed: list[list[OutboxEntry]] = [[] for _ in stores]

    async def claim_all(store: SQLAlchemyOutboxStore, into: list[OutboxEntry]) -> None:
        while batch := await store.claim(7, LONG_LEASE_MS):
            into.extend(batch)
            await asyncio.sleep(0)

    async with asyncio.timeout(60):
        await asyncio.gather(*(claim_all(s, c) for s, c in zip(stores, claimed, strict=True)))
    ids = [e.id for batch in claimed for e in batch]
    assert len(ids) == entries
    assert len(set(ids)) == entries
    assert all(e.attempts == 1 for batch in claimed for e in batch)


@pytest.mark.postgres
async def test_claims_work_on_a_repeatable_read_engine(postgres_harness: OutboxHarness) -> None:
    """Claims run under READ COMMITTED whatever the app engine's default isolation."""
    tm, writer = await _store(postgres_harness)
    await _append(tm, writer, 300)
    stores = [
        postgres_harness.store(
            SQLAlchemyTransactionManager(postgres_harness.engine(isolation_level="REPEATABLE READ"))
        )
        for _ in range(3)
    ]
    claimed: list[str] = []

    async def claim_all(store: SQLAlchemyOutboxStore) -> None:
        while batch := await store.claim(10, LONG_LEASE_MS):
            claimed.extend(e.id for e in batch)
            await asyncio.sleep(0)

    async with asyncio.timeout(60):
        await asyncio.gather(*(claim_all(s) for s in stores))
    assert len(claimed) == len(set(claimed)) == 300


async def test_a_closed_store_refuses_calls_and_leaves_the_engine_open(
    harness: OutboxHarness,
) -> None:
    tm, store = await _store(harness)
    await _append(tm, store, 1)
    await store.close()
    await store.close()  # idempotent
    with pytest.raises(DriverError, match="closed"):
        await store.claim(10, LONG_LEASE_MS)
    async with tm.engine.connect() as conn:  # the borrowed engine still works
        assert (await conn.execute(text("SELECT 1"))).scalar_one() == 1


def test_an_in_memory_sqlite_engine_is_refused() -> None:
    engine = create_engine("sqlite+aiosqlite://")
    with pytest.raises(ValueError, match="memory"):
        SQLAlchemyOutboxStore(transaction_manager=SQLAlchemyTransactionManager(engine))
