"""SQLAlchemyJobStore behaviour beyond the conformance suite, on SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
import json
import re
import threading
import time
from typing import Any

import pytest
from sqlalchemy import MetaData, event, text
from sqlalchemy.pool import StaticPool

from jobs.clock import ManualClock
from jobs.errors import DriverError, StoreSchemaError, StoreUnavailableError
from jobs.testing import new_request
from orm_sqlalchemy._database.statements import Statement
from orm_sqlalchemy.engine import create_engine
from orm_sqlalchemy.store import PRUNE_BATCH, SQLAlchemyJobStore
from orm_sqlalchemy.tables import job_schema, state_key
from tests.support import captured_logs, wait_until

from .support import StoreHarness

LEASE_MS = 30_000


async def test_payload_text_is_stored_byte_for_byte(harness: StoreHarness) -> None:
    store = harness.store()
    payload: Any = {"nul": "a\u0000b", "ctrl": "\u0001\u001f", "astral": "\U0001f680"}
    for depth in range(400):
        payload = [payload] if depth % 2 else {"d": payload}
    raw = json.dumps(payload, ensure_ascii=False, separators=(",", ":"))
    job_id = await store.enqueue(new_request(payload_json=raw))
    rows = await harness.sql("SELECT payload FROM {table} WHERE id = :id", id=job_id)
    assert rows == [(raw,)]
    [claimed] = await store.claim(1, LEASE_MS, ["t"])
    assert claimed.payload == raw
    info = await store.get_job(claimed.id)
    assert info is not None
    assert info.payload == payload


async def test_table_prefixes_isolate_stores(harness: StoreHarness) -> None:
    first = harness.store()
    other_prefix = f"{harness.prefix}b_"
    second = harness.store(table_prefix=other_prefix)
    try:
        job_id = await first.enqueue(new_request(key="shared-key"))
        assert job_id is not None
        assert await second.enqueue(new_request(key="shared-key")) is not None
        assert await second.get_job(job_id) is None
        assert [job.id for job in await first.claim(10, LEASE_MS, ["t"])] == [job_id]
        assert (await second.counts())["pending"] == 1
        assert second.table.name == f"{other_prefix}queue"
    finally:
        await second.close()
        if harness.postgres:
            await harness.sql(f'DROP TABLE IF EXISTS "{other_prefix}queue"')
            await harness.sql(f'DROP TABLE IF EXISTS "{other_prefix}workers"')


async def test_a_table_missing_a_column_fails_naming_it(harness: StoreHarness) -> None:
    await harness.sql("CREATE TABLE {table} (id VARCHAR(255) PRIMARY KEY, type TEXT, payload TEXT)")
    store = harness.store()
    with pytest.raises(StoreSchemaError, match=rf"{harness.table}.*has no column 'state'"):
        await store.enqueue(new_request())
    with pytest.raises(StoreSchemaError, match="has no column 'state'"):
        await store.create_schema()


async def test_a_job_table_made_before_the_operations_spi_is_upgraded_by_create_schema(
    harness: StoreHarness,
) -> None:
    old = harness.store()
    before = await old.enqueue(new_request())
    await old.close()
    # The shape of a job table made before the operations SPI: no errors column, no listing
    # indexes, no worker registry (and no audit trail, which came later).
    for index in ("created", "by_state"):
        await harness.sql(f'DROP INDEX "ix_{harness.table}_{index}"')
    await harness.sql(f'DROP TABLE "{harness.prefix}workers"')
    await harness.sql(f'DROP TABLE "{harness.prefix}audit"')
    await harness.sql(f'DROP TABLE "{harness.prefix}counters"')
    await harness.sql(f'DROP TABLE "{harness.prefix}edges"')
    await harness.sql(f'DROP TABLE "{harness.prefix}paused_queues"')
    await harness.sql(f'DROP TABLE "{harness.prefix}limit_claims"')
    await harness.sql("ALTER TABLE {table} DROP COLUMN errors")

    unmigrated = harness.store(create_tables=False)
    with pytest.raises(StoreSchemaError, match=r"has no column 'errors'.*ALTER TABLE .* errors"):
        await unmigrated.enqueue(new_request())
    listing_indexes = {f"ix_{harness.table}_created", f"ix_{harness.table}_by_state"}
    tables, indexes = await listed_names(harness)
    assert tables == {harness.table}  # refused before anything was created
    assert not listing_indexes & indexes

    store = harness.store()
    await store.create_schema()  # adds the column, the indexes, the worker registry, the trail
    tables, indexes = await listed_names(harness)
    names = ("workers", "audit", "counters", "edges", "paused_queues", "limit_claims")
    later = {f"{harness.prefix}{name}" for name in names}
    assert tables == {harness.table, *later}
    assert listing_indexes <= indexes
    page = await store.list_jobs(state="pending")
    assert [job.id for job in page.jobs] == [before]
    assert page.jobs[0].errors == ()
    assert await store.list_workers() == []


async def test_a_job_table_without_the_stall_columns_gets_them_from_create_schema(
    harness: StoreHarness,
) -> None:
    """A table of the version before stalls: create_tables=False names each missing column
    and the statement that adds it; create_schema adds them; its rows read as 0 stalls of 10."""
    old = harness.store()
    before = await old.enqueue(new_request())
    await old.close()
    for column in ("stalls", "max_stalls"):
        await harness.sql(f"ALTER TABLE {{table}} DROP COLUMN {column}")
    unmigrated = harness.store(create_tables=False)
    with pytest.raises(StoreSchemaError) as refused:
        await unmigrated.get_job(before or "")
    message = str(refused.value)
    assert f"table '{harness.table}' has no column 'stalls'" in message
    assert re.search(r"`ALTER TABLE \S+ ADD COLUMN stalls INTEGER DEFAULT 0 NOT NULL`", message)
    store = harness.store()
    await store.create_schema()
    info = await store.get_job(before or "")
    assert info is not None
    assert (info.stalls, info.max_stalls) == (0, 10)
    [held] = await store.claim(1, LEASE_MS, ["t"])
    harness.clock.advance(LEASE_MS)
    [again] = await store.claim(1, LEASE_MS, ["t"])
    assert (again.id, again.attempt, again.stalls) == (held.id, 1, 1)
    assert (await harness.store(create_tables=False).get_job(held.id)) is not None


async def test_a_job_table_of_the_previous_version_is_upgraded_by_create_schema(
    harness: StoreHarness,
) -> None:
    """Tables of the previous version had UNIQUE (key) over every row and a state index on the
    plain state: they work as before, unmigrated, and create_schema brings them the partial key
    index and the state index keyed by listed_state, and drops the state index (and on
    PostgreSQL the full key constraint) they replace, which took entries per row version."""
    old = harness.store()
    await old.create_schema()
    await old.close()
    await harness.sql(f'DROP INDEX "ux_{harness.table}_key"')
    await harness.sql(f'DROP INDEX "ix_{harness.table}_by_state"')
    old_state = f"ix_{harness.table}_state"
    await harness.sql(f'CREATE INDEX "{old_state}" ON {{table}} (state, created_at, id)')
    full = f'"{harness.table}_key_key"'
    if harness.postgres:
        await harness.sql(f"ALTER TABLE {{table}} ADD CONSTRAINT {full} UNIQUE (key)")
    else:  # an inline UNIQUE constraint is a full unique index on SQLite
        await harness.sql(f"CREATE UNIQUE INDEX {full} ON {{table}} (key)")
    unmigrated = harness.store(create_tables=False)
    first = await unmigrated.enqueue(new_request(key="k"))
    assert first is not None
    assert await unmigrated.enqueue(new_request(key="k")) is None

    store = harness.store()
    await store.create_schema()
    _, indexes = await listed_names(harness)
    assert {f"ux_{harness.table}_key", f"ix_{harness.table}_by_state"} <= indexes
    assert old_state not in indexes
    if harness.postgres:
        assert f"{harness.table}_key_key" not in indexes
    assert await store.enqueue(new_request(key="k")) is None
    assert await store.enqueue(new_request()) is not None
    assert (await store.find_job("k")) is not None
    assert [job.id for job in await store.claim(5, LEASE_MS, ["t"])][:1] == [first]


async def test_a_job_table_made_before_named_queues_is_upgraded_by_create_schema(
    harness: StoreHarness,
) -> None:
    """A table of the version before named queues (no queue column, the claim index without
    it): its jobs are in "default" once create_schema added the column (a constant default),
    the new claim index replaces the old one, and named queues work on it."""
    old = harness.store()
    before = await old.enqueue(new_request())
    await old.close()
    await harness.sql(f'DROP INDEX "ix_{harness.table}_queue_claim"')
    old_claim = f"ix_{harness.table}_claim"
    await harness.sql(
        f'CREATE INDEX "{old_claim}" ON {{table}} (priority DESC, due_at) WHERE due_at IS NOT NULL'
    )
    await harness.sql("ALTER TABLE {table} DROP COLUMN queue")
    unmigrated = harness.store(create_tables=False)
    with pytest.raises(StoreSchemaError, match="has no column 'queue'"):
        await unmigrated.get_job(before or "")
    store = harness.store()
    await store.create_schema()
    _, indexes = await listed_names(harness)
    assert f"ix_{harness.table}_queue_claim" in indexes
    assert old_claim not in indexes
    info = await store.get_job(before or "")
    assert info is not None
    assert info.queue == "default"
    emails = await store.enqueue(new_request(queue="emails"))
    assert [job.id for job in await store.claim(5, LEASE_MS, ["t"])] == [before]
    assert [job.id for job in await store.claim(5, LEASE_MS, ["t"], "emails")] == [emails]


async def listed_names(harness: StoreHarness) -> tuple[set[str], set[str]]:
    """The harness's tables in the database, and the indexes of its job table."""
    if harness.postgres:
        tables = "SELECT tablename FROM pg_tables WHERE tablename LIKE :prefix"
        indexes = "SELECT indexname FROM pg_indexes WHERE tablename = :table"
    else:
        tables = "SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE :prefix"
        indexes = "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = :table"
    found_tables = await harness.sql(tables, prefix=f"{harness.prefix}%")
    found_indexes = await harness.sql(indexes, table=harness.table)
    return {row[0] for row in found_tables}, {row[0] for row in found_indexes}


@pytest.mark.parametrize(
    ("state", "job_type"),
    [
        ("failed", None),
        (None, "t"),
        ("failed", "t"),
        (None, None),
        ("pending", None),
        ("active", "t"),
    ],
)
async def test_a_list_page_is_read_off_an_index_in_order_on_a_fresh_table(
    harness: StoreHarness, state: str | None, job_type: str | None
) -> None:
    """Without statistics PostgreSQL estimates a few matching rows, and would sort them all
    rather than stop at the page's LIMIT of an ordered index scan (issue 10: 18-24 ms a page
    among 200,000 jobs, against 0.2 ms read in order)."""
    store = harness.store()
    store._statistics_checked = True  # a table with no statistics: no analyse after the first
    for _ in range(6):
        await store.enqueue_many([new_request() for _ in range(500)])
    name = "list_jobs" if state is None else "list_jobs_in_state"
    listing = store._sql[name]
    explain = "EXPLAIN " if harness.postgres else "EXPLAIN QUERY PLAN "
    listed = None if state is None else state_key(state)
    params = {"before_at": 2**63 - 1, "before_id": "", "state": state, "type": job_type}
    params["queue"] = None
    params["listed"] = listed
    plan = await store._backend.fetch_unsorted(
        Statement(name, explain + listing.text, listing.positional),
        {**params, "now": 0, "limit": 51},
    )
    steps = [str(row[0] if harness.postgres else row["detail"]) for row in plan]
    index = f"ix_{harness.table}_{'created' if state is None else 'by_state'}"
    scan = f"Index Scan Backward using {index}" if harness.postgres else f"USING INDEX {index}"
    assert any(scan in step for step in steps), steps
    assert not any("Sort" in step or "TEMP B-TREE" in step for step in steps), steps


async def test_without_create_tables_a_missing_table_is_reported(harness: StoreHarness) -> None:
    store = harness.store(create_tables=False)
    with pytest.raises(StoreSchemaError, match=rf"{harness.table}.*does not exist"):
        await store.claim(1, LEASE_MS, ["t"])
    await harness.store().create_schema()
    assert await store.claim(1, LEASE_MS, ["t"]) == []


async def test_stores_starting_together_create_the_table_once(harness: StoreHarness) -> None:
    stores = [harness.store() for _ in range(5)]
    ids = await asyncio.gather(*(store.enqueue(new_request()) for store in stores))
    assert None not in ids
    assert (await stores[0].counts())["pending"] == 5


async def test_metadata_is_exposed_for_migrations(harness: StoreHarness) -> None:
    store = harness.store()
    assert store.metadata.tables[harness.table] is store.table
    app_metadata = MetaData()
    schema = job_schema(harness.prefix, app_metadata)
    assert schema.jobs.name == harness.table
    assert harness.table in app_metadata.tables
    assert {index.name for index in schema.jobs.indexes} == {
        f"ux_{harness.table}_key",
        f"ix_{harness.table}_due",
        f"ix_{harness.table}_queue_claim",
        f"ix_{harness.table}_expires",
        f"ix_{harness.table}_created",
        f"ix_{harness.table}_by_state",
        f"ix_{harness.table}_workflow",
    }
    assert schema.edges.name == f"{harness.prefix}edges"
    assert f"{harness.prefix}edges" in app_metadata.tables
    assert schema.workers.name == f"{harness.prefix}workers"
    assert schema.limit_claims.name == f"{harness.prefix}limit_claims"
    assert f"{harness.prefix}limit_claims" in app_metadata.tables
    assert f"{harness.prefix}workers" in app_metadata.tables
    with pytest.raises(ValueError, match="table_prefix"):
        job_schema('x"; DROP TABLE y; --')


async def test_a_borrowed_engine_stays_open_after_close(harness: StoreHarness) -> None:
    engine = create_engine(harness.url)
    disposed: list[bool] = []
    event.listen(engine.sync_engine, "engine_disposed", lambda _: disposed.append(True))
    try:
        store = harness.store(engine=engine)
        await store.enqueue(new_request())
        await store.close()
        assert disposed == []
        async with engine.connect() as conn:
            count = await conn.scalar(text(f'SELECT count(*) FROM "{harness.table}"'))
        assert count == 1
    finally:
        await engine.dispose()


async def test_an_owned_engine_is_disposed_on_close(harness: StoreHarness) -> None:
    store = harness.store()
    disposed: list[bool] = []
    event.listen(store.engine.sync_engine, "engine_disposed", lambda _: disposed.append(True))
    await store.enqueue(new_request())
    await store.close()
    await store.close()
    assert disposed == [True]
    with pytest.raises(DriverError, match="closed"):
        await store.enqueue(new_request())


async def test_retention_deletes_expired_rows(harness: StoreHarness) -> None:
    store = harness.store(retain_completed_ms=1_000, retain_failed_ms=1_000, prune_interval_ms=0)
    for _ in range(3):
        await store.enqueue(new_request())
    for job in (await store.claim(3, LEASE_MS, ["t"]))[:2]:
        assert await store.complete(job.id, job.lease_token)
    harness.clock.advance(999)
    assert await store.prune() == 0
    harness.clock.advance(1)
    await store.enqueue(new_request())  # prunes in passing
    rows = await harness.sql("SELECT state FROM {table} ORDER BY state")
    assert rows == [("active",), ("pending",)]
    assert await store.prune() == 0
    assert PRUNE_BATCH >= 100


async def test_wait_for_work_wakes_when_a_delayed_job_falls_due(harness: StoreHarness) -> None:
    # The store's own clock (the database's on PostgreSQL, the host's on SQLite).
    store = harness.store(clock=None)
    await store.enqueue(new_request(delay_ms=300))
    started = time.monotonic()
    await asyncio.wait_for(store.wait_for_work(["t"], 30_000), timeout=5)
    assert time.monotonic() - started >= 0.2
    assert len(await store.claim(1, LEASE_MS, ["t"])) == 1


async def test_wait_for_work_ignores_other_types(harness: StoreHarness) -> None:
    store = harness.store()
    waiter = asyncio.create_task(store.wait_for_work(["wanted"], 30_000))
    await store.enqueue(new_request("other"))
    done, _ = await asyncio.wait({waiter}, timeout=0.2)
    assert not done
    await store.enqueue(new_request("wanted"))
    await asyncio.wait_for(waiter, timeout=5)


async def test_moving_an_injected_clock_wakes_waiters(harness: StoreHarness) -> None:
    clock = ManualClock()
    store = harness.store(clock=clock)
    waiter = asyncio.create_task(store.wait_for_work(["t"], 30_000))
    await asyncio.sleep(0.05)
    clock.advance(1_000)
    await asyncio.wait_for(waiter, timeout=5)


async def test_a_job_failed_by_its_stalls_is_logged(harness: StoreHarness) -> None:
    store = harness.store()
    job_id = await store.enqueue(new_request(max_attempts=1, max_stalls=0))
    await store.claim(1, LEASE_MS, ["t"])
    harness.clock.advance(LEASE_MS)
    with captured_logs("WARNING") as records:
        assert await store.claim(1, LEASE_MS, ["t"]) == []
    assert any(
        job_id in record["message"] and "max_stalls" in record["message"] for record in records
    )


async def test_a_duplicate_job_id_fails_alone(harness: StoreHarness) -> None:
    store = harness.store()
    taken = new_request()
    await store.enqueue(taken)
    requests = [new_request() for _ in range(5)]
    results = await asyncio.gather(
        *(store.enqueue(request) for request in [*requests[:2], taken, *requests[2:]]),
        return_exceptions=True,
    )
    assert isinstance(results[2], DriverError)
    assert [results[i] for i in (0, 1, 3, 4, 5)] == [request.id for request in requests]
    assert (await store.counts())["pending"] == 6


@pytest.mark.parametrize(
    "url",
    [
        pytest.param("postgresql+asyncpg://postgres@127.0.0.1:1/test", id="postgres-closed-port"),
        pytest.param("sqlite+aiosqlite:////nonexistent/dir/jobs.db", id="sqlite-no-directory"),
    ],
)
async def test_an_unreachable_database_is_store_unavailable(url: str) -> None:
    store = SQLAlchemyJobStore(url, table_prefix="unreachable_")
    try:
        with pytest.raises(StoreUnavailableError, match=r"SQLAlchemyJobStore\(.*unreachable_queue"):
            await store.enqueue(new_request())
        with pytest.raises(StoreUnavailableError):
            await store.claim(1, LEASE_MS, ["t"])
    finally:
        await store.close()
    # aiosqlite stops the thread of a failed connect without awaiting it: let it finish while
    # this test's event loop still runs.
    await wait_until(
        lambda: not any("_connection_worker_thread" in t.name for t in threading.enumerate()),
        message="aiosqlite's worker threads to stop",
    )


@pytest.mark.parametrize(
    ("url", "options", "message"),
    [
        ("sqlite+aiosqlite://", {}, "SQLite file"),
        ("sqlite+aiosqlite:///:memory:", {}, "SQLite file"),
        ("sqlite+aiosqlite:///jobs.db", {"poolclass": StaticPool}, "StaticPool"),
    ],
)
async def test_engines_the_store_cannot_use_are_refused(
    url: str, options: dict[str, Any], message: str
) -> None:
    engine = create_engine(url, **options)
    try:
        with pytest.raises(ValueError, match=message):
            SQLAlchemyJobStore(engine=engine)
    finally:
        await engine.dispose()


def test_a_url_or_an_engine_is_required() -> None:
    with pytest.raises(ValueError, match="exactly one"):
        SQLAlchemyJobStore()
    with pytest.raises(ValueError, match="retain_completed_ms"):
        SQLAlchemyJobStore("sqlite:///jobs.db", retain_completed_ms=-1)


async def test_concurrent_settles_each_get_their_own_outcome(harness: StoreHarness) -> None:
    store = harness.store()
    for _ in range(10):
        await store.enqueue(new_request())
    jobs = await store.claim(10, LEASE_MS, ["t"])
    twice = jobs[0]
    results = await asyncio.gather(
        *(store.complete(job.id, job.lease_token) for job in jobs),
        store.complete(twice.id, twice.lease_token),
        store.complete(jobs[1].id, "1:stale"),
        store.complete(jobs[2].id, jobs[3].lease_token),
    )
    assert results[:10] == [True] * 10
    assert results[10:] == [False, False, False]
    assert (await store.counts())["completed"] == 10
