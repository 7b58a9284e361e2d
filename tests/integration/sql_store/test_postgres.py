"""PostgreSQL specifics: SKIP LOCKED claims, the database clock, LISTEN/NOTIFY, lost connections."""

from __future__ import annotations

import asyncio
import time

import pytest
from sqlalchemy import text

from jobs.errors import StoreSchemaError, StoreUnavailableError
from jobs.spi import JobRequest
from jobs.testing import new_request
from orm_sqlalchemy.engine import create_engine
from orm_sqlalchemy.store import SQLAlchemyJobStore

from .support import StoreHarness

pytestmark = pytest.mark.postgres

LEASE_MS = 30_000


async def test_concurrent_claimers_on_separate_stores_take_each_job_once(
    pg_harness: StoreHarness,
) -> None:
    producer = pg_harness.store()
    total, limit = 1_000, 7
    for _ in range(total // 100):
        await asyncio.gather(*(producer.enqueue(new_request()) for _batch in range(100)))
    stores = [pg_harness.store() for _ in range(5)]
    seen: list[str] = []
    batch_sizes: list[int] = []

    async def claimer(store: SQLAlchemyJobStore) -> None:
        while True:
            batch = await store.claim(limit, LEASE_MS, ["t"])
            if not batch:
                return
            batch_sizes.append(len(batch))
            seen.extend(job.id for job in batch)

    await asyncio.gather(*(claimer(stores[i % 5]) for i in range(15)))
    assert len(seen) == total
    assert len(set(seen)) == total
    assert max(batch_sizes) <= limit
    assert (await producer.counts())["active"] == total


async def test_claims_stay_read_committed_under_a_serializable_engine(
    pg_harness: StoreHarness,
) -> None:
    engine = create_engine(pg_harness.url, isolation_level="SERIALIZABLE")
    try:
        stores = [pg_harness.store(engine=engine) for _ in range(3)]
        for _ in range(60):
            await stores[0].enqueue(new_request())
        batches = await asyncio.gather(
            *(store.claim(5, LEASE_MS, ["t"]) for store in stores for _ in range(6))
        )
        claimed = [job.id for batch in batches for job in batch]
        assert len(claimed) == len(set(claimed)) == 60
    finally:
        for store in pg_harness._stores:
            await store.close()
        await engine.dispose()


async def test_leases_expire_by_the_database_clock(pg_harness: StoreHarness) -> None:
    store = pg_harness.store(clock=None)
    job_id = await store.enqueue(new_request())
    [first] = await store.claim(1, 200, ["t"])
    assert await store.claim(1, 200, ["t"]) == []
    deadline = time.monotonic() + 5
    while not (again := await store.claim(1, 200, ["t"])):
        assert time.monotonic() < deadline, "the 200 ms lease never expired"
        await asyncio.sleep(0.02)
    assert (again[0].id, again[0].attempt, again[0].stalls) == (job_id, 1, 1)
    assert again[0].lease_token != first.lease_token


async def test_run_at_is_set_by_the_database_clock(pg_harness: StoreHarness) -> None:
    store = pg_harness.store(clock=None)
    job_id = await store.enqueue(new_request(delay_ms=60_000))
    [(db_now_ms,)] = await pg_harness.sql("SELECT floor(extract(epoch FROM now()) * 1000)::bigint")
    info = await store.get_job(job_id)
    assert info is not None
    run_at_ms = int(info.run_at.timestamp() * 1000)
    assert 55_000 <= run_at_ms - db_now_ms <= 60_000
    assert await store.claim(1, LEASE_MS, ["t"]) == []


async def test_a_store_on_another_engine_wakes_a_waiter_by_notify(
    pg_harness: StoreHarness,
) -> None:
    waiting, enqueuing = pg_harness.store(), pg_harness.store()
    assert waiting.engine is not enqueuing.engine
    waiter = asyncio.create_task(waiting.wait_for_work(["t"], 30_000))
    await asyncio.sleep(0.1)  # the waiter is listening
    assert not waiter.done()
    started = time.monotonic()
    await enqueuing.enqueue(new_request())
    await asyncio.wait_for(waiter, timeout=5)
    assert time.monotonic() - started < 2


async def test_a_lost_connection_is_store_unavailable_then_recovers(
    pg_harness: StoreHarness,
) -> None:
    name = f"jobs-test-{pg_harness.prefix}"
    engine = create_engine(
        pg_harness.url, connect_args={"server_settings": {"application_name": name}}
    )
    locker = create_engine(pg_harness.url)
    store = pg_harness.store(engine=engine)
    try:
        await store.enqueue(new_request())
        async with locker.begin() as conn:
            # The claim blocks on the lock; then its connection is killed under it.
            await conn.execute(text(f'LOCK TABLE "{pg_harness.table}" IN ACCESS EXCLUSIVE MODE'))
            claim = asyncio.create_task(store.claim(1, LEASE_MS, ["t"]))
            await asyncio.sleep(0.2)
            await pg_harness.sql(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                " WHERE application_name = :name",
                name=name,
            )
            with pytest.raises(StoreUnavailableError, match=r"SQLAlchemyJobStore\("):
                await asyncio.wait_for(claim, timeout=5)
        # Idle connections the server closed are replaced without an error.
        await pg_harness.sql(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = :name",
            name=name,
        )
        assert len(await store.claim(1, LEASE_MS, ["t"])) == 1
    finally:
        await store.close()
        await engine.dispose()
        await locker.dispose()


async def test_close_leaves_no_connection_open(pg_harness: StoreHarness) -> None:
    name = f"jobs-test-{pg_harness.prefix}"
    engine = create_engine(
        pg_harness.url, connect_args={"server_settings": {"application_name": name}}
    )
    store = pg_harness.store(engine=engine)
    await store.enqueue(new_request())
    await asyncio.gather(*(store.claim(1, LEASE_MS, ["t"]) for _ in range(4)))
    await store.wait_for_work(["t"], 1)
    await store.close()
    await engine.dispose()
    count_sql = "SELECT count(*) FROM pg_stat_activity WHERE application_name = :name"
    deadline = time.monotonic() + 5
    while (await pg_harness.sql(count_sql, name=name))[0][0] != 0:
        assert time.monotonic() < deadline, "the store's connections stayed open"
        await asyncio.sleep(0.02)


async def test_the_claim_uses_the_claim_index(pg_harness: StoreHarness) -> None:
    """Among many finished rows, and due jobs of another queue, the claim walks the partial
    (queue, priority desc, due_at) index."""
    store = pg_harness.store()
    await store.create_schema()
    await pg_harness.sql(
        "INSERT INTO {table} (id, type, payload, state, attempts, max_attempts, run_at, due_at,"
        " created_at) SELECT g::text, 't', 'null', 'completed', 1, 1, 0, NULL, 0"
        " FROM generate_series(1, 5000) g"
    )
    await pg_harness.sql(
        "INSERT INTO {table} (id, type, payload, state, attempts, max_attempts, run_at, due_at,"
        " created_at, queue) SELECT 'o' || g::text, 't', 'null', 'pending', 0, 1, 0, 0, 0,"
        " 'other' FROM generate_series(1, 2000) g"
    )
    await pg_harness.sql("ANALYZE {table}")
    await _assert_claim_reads_the_index(pg_harness, "1")


async def test_a_never_analysed_table_is_analysed_after_the_first_enqueue(
    pg_harness: StoreHarness,
) -> None:
    """Without statistics the planner sorted every due job of a freshly filled table (about
    30 ms among 100,000) instead of reading the claim index in order: the store analyses a
    never-analysed job table once, after its first enqueue."""
    store = pg_harness.store()
    await store.enqueue_many([new_request() for _ in range(2_000)])
    (never,) = await pg_harness.sql(
        "SELECT last_analyze IS NULL AND last_autoanalyze IS NULL FROM pg_stat_user_tables"
        " WHERE relname = :name",
        name=pg_harness.table,
    )
    assert never[0] is False
    await _assert_claim_reads_the_index(pg_harness, "9e15")


async def test_a_store_starting_on_an_up_to_date_table_waits_for_no_open_transaction(
    pg_harness: StoreHarness,
) -> None:
    """Another process's transaction left open on the job and worker tables (its worker's
    loop blocked mid-write) must not hold up a new store's schema set-up, nor it the writes."""
    first = pg_harness.store()
    await first.create_schema()
    await first.enqueue(new_request())
    engine = create_engine(pg_harness.url)
    try:
        async with engine.connect() as connection:
            transaction = await connection.begin()
            tables = (
                "queue", "workers", "audit", "counters", "edges", "paused_queues", "limit_claims"
            )
            for table in (f"{pg_harness.prefix}{name}" for name in tables):
                await connection.execute(text(f'LOCK TABLE "{table}" IN ROW EXCLUSIVE MODE'))
            try:
                second = pg_harness.store()
                async with asyncio.timeout(5):
                    await second.create_schema()
                    await second.enqueue(new_request())
            finally:
                await transaction.rollback()
    finally:
        await engine.dispose()


async def _inserts_prepared(pg_harness: StoreHarness, *requests: JobRequest) -> list[str]:
    """The INSERTs into the job table that a store enqueueing ``requests`` prepared: its
    engine has one connection, whose prepared statements are read once the store closed."""
    engine = create_engine(pg_harness.url, pool_size=1, max_overflow=0)
    try:
        store = pg_harness.store(engine=engine)
        for request in requests:
            await store.enqueue(request)
        await store.close()
        async with engine.connect() as connection:
            result = await connection.execute(
                text("SELECT statement FROM pg_prepared_statements WHERE statement LIKE :insert"),
                {"insert": f"INSERT INTO {pg_harness.table} %"},
            )
            return [row[0] for row in result]
    finally:
        await engine.dispose()


async def test_a_job_without_a_key_is_a_plain_insert(pg_harness: StoreHarness) -> None:
    """No upsert where no row can conflict: its speculative insertion costs server CPU."""
    inserts = await _inserts_prepared(pg_harness, new_request(), new_request())
    assert len(inserts) == 1
    assert "ON CONFLICT" not in inserts[0]


async def test_a_job_with_a_key_is_an_upsert_on_the_key(pg_harness: StoreHarness) -> None:
    inserts = await _inserts_prepared(pg_harness, new_request(key="k"), new_request(key="k"))
    assert len(inserts) == 1
    assert "ON CONFLICT (key)" in inserts[0]


async def test_a_new_connection_learns_the_array_codecs_as_it_opens(
    pg_harness: StoreHarness,
) -> None:
    """asyncpg asks the server about ``integer[]`` and ``bigint[]`` (three round trips) the
    first time a connection binds them: a batch enqueue binds both, and on a fresh pooled
    connection it must not pay that in the middle of its statement."""
    setup = pg_harness.store()  # its own engine: DDL makes SQLAlchemy drop asyncpg's type cache
    await setup.create_schema()
    await setup.close()
    engine = create_engine(pg_harness.url, pool_size=1, max_overflow=0)
    try:
        store = pg_harness.store(engine=engine)
        sent: list[str] = []
        raw = await engine.raw_connection()
        raw.driver_connection.add_query_logger(lambda record: sent.append(record.query))
        raw.close()
        await store.enqueue_many([new_request(), new_request(delay_ms=5_000)])
        await store.close()
        await asyncio.sleep(0)  # the query loggers are called soon after each statement
        assert any(query.startswith("INSERT INTO") for query in sent), sent
        assert not [query for query in sent if "typeinfo_tree" in query]
    finally:
        await engine.dispose()


async def test_the_pool_hands_out_the_connection_given_back_last(
    pg_harness: StoreHarness,
) -> None:
    """Last in, first out: the stores' statements stay on the few connections already
    prepared for them instead of coming to each of the pool's in turn."""
    engine = create_engine(pg_harness.url)
    try:
        first, second = await engine.raw_connection(), await engine.raw_connection()
        last_given_back = second.driver_connection
        first.close()
        second.close()
        again = await engine.raw_connection()
        assert again.driver_connection is last_given_back
        again.close()
    finally:
        await engine.dispose()


async def test_a_statement_the_server_refuses_is_not_called_a_lost_connection(
    pg_harness: StoreHarness,
) -> None:
    """The server refused the statement (its table was dropped under the store): the
    connection is fine, goes back to the pool, and the error says what is wrong with the
    tables, not that the database went away (the check-in lets go of the connection, so
    whether it broke is read before)."""
    store = pg_harness.store()
    try:
        await store.enqueue(new_request())
        await pg_harness.sql(f'DROP TABLE "{pg_harness.table}"')
        with pytest.raises(StoreSchemaError, match="does not fit the database's tables"):
            await store.claim(1, LEASE_MS, ["t"])
    finally:
        await store.close()


async def _assert_claim_reads_the_index(pg_harness: StoreHarness, due_by: str) -> None:
    """The claim's query (jobs due by ``due_by``) reads the queue claim index in order: no
    Sort in its plan."""
    engine = create_engine(pg_harness.url)
    try:
        async with engine.connect() as conn:
            plan = await conn.execute(
                text(
                    f'EXPLAIN SELECT id FROM "{pg_harness.table}" WHERE due_at <= {due_by} '
                    "AND queue = 'default' AND type = ANY(ARRAY['t']) "
                    "ORDER BY priority DESC, due_at LIMIT 10 FOR UPDATE SKIP LOCKED"
                )
            )
            lines = "\n".join(row[0] for row in plan)
    finally:
        await engine.dispose()
    assert f"ix_{pg_harness.table}_queue_claim" in lines, lines
    assert "Sort" not in lines, lines
