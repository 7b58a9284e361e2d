"""PostgreSQL behind a real PgBouncer in transaction mode: nothing the stores do outlives their
transactions, LISTEN is never sent through it, ``listen_url`` restores instant wake-up, and a
wake-up that never comes back is reported.

The conformance suite, the outbox tests and the worker-process tests also run through the same
PgBouncer (their "pgbouncer" parameters); this module holds what only a pooler can show.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

import asyncpg  # type: ignore[import-untyped]
import pytest
from sqlalchemy import Column, Integer, MetaData, Table
from sqlalchemy.engine import make_url

from jobs.testing import new_request
from orm_sqlalchemy import (
    SQLAlchemyJobStore,
    SQLAlchemyOutboxStore,
    SQLAlchemyTransactionManager,
    create_engine,
)
from orm_sqlalchemy.factory import drop_prefixed_tables
from orm_sqlalchemy.tables import notify_channel
from tests.pgbouncer import POOL_SIZE, PgBouncer
from tests.stores import POSTGRES_URL
from tests.support import captured_logs, wait_until

pytestmark = [pytest.mark.postgres, pytest.mark.pgbouncer]

SETTINGS = (
    "synchronous_commit",
    "default_transaction_isolation",
    "statement_timeout",
    "lock_timeout",
    "search_path",
    "idle_in_transaction_session_timeout",
)


def _asyncpg_dsn(url: str) -> str:
    parsed = make_url(url)
    return f"postgresql://{parsed.username}@{parsed.host}:{parsed.port}/{parsed.database}"


async def _session_state(connection: Any) -> dict[str, Any]:
    row = await connection.fetchrow(
        "SELECT "
        + ", ".join(f"current_setting('{name}') AS {name}" for name in SETTINGS)
        + ", (SELECT count(*) FROM pg_listening_channels()) AS listening"
    )
    return dict(row)


@pytest.fixture
async def prefix(pgbouncer: PgBouncer) -> AsyncIterator[str]:
    prefix = f"b{uuid.uuid4().hex[:10]}_"
    yield prefix
    engine = create_engine(POSTGRES_URL)
    try:
        async with engine.begin() as conn:
            await drop_prefixed_tables(conn, prefix)
    finally:
        await engine.dispose()


async def test_fresh_clients_of_the_pgbouncer_see_server_defaults_after_the_stores_work(
    pgbouncer: PgBouncer, prefix: str
) -> None:
    direct = await asyncpg.connect(_asyncpg_dsn(POSTGRES_URL))
    try:
        defaults = await _session_state(direct)
    finally:
        await direct.close()
    assert defaults["listening"] == 0

    # The stores' whole repertoire through the PgBouncer: enqueue (and its NOTIFY), wait
    # (LISTEN would go here), claim, heartbeat, complete, retry, fail; an outbox append in an
    # app transaction, its NOTIFY after commit, claim and mark.
    store = SQLAlchemyJobStore(pgbouncer.url, table_prefix=prefix)
    engine = create_engine(pgbouncer.url)
    tm = SQLAlchemyTransactionManager(engine)
    outbox = SQLAlchemyOutboxStore(tm, table_prefix=prefix)
    orders = Table(f"{prefix}orders", MetaData(), Column("id", Integer, primary_key=True))
    try:
        await asyncio.gather(*(store.enqueue(new_request()) for _ in range(60)))
        await store.wait_for_work(["t"], 50)
        claimed = await store.claim(30, 30_000, ["t"])
        assert len(claimed) == 30
        for index, job in enumerate(claimed):
            assert await store.heartbeat(job.id, job.lease_token, 30_000)
            if index % 3 == 0:
                assert await store.complete(job.id, job.lease_token)
            elif index % 3 == 1:
                assert await store.retry(job.id, job.lease_token, delay_ms=0, error="again")
            else:
                assert await store.fail(job.id, job.lease_token, error="no")
        async with engine.begin() as conn:
            await conn.run_sync(orders.metadata.create_all)
        await outbox.create_schema()
        for number in range(20):
            async with tm.transaction() as session:
                await session.execute(orders.insert().values(id=number))
                await outbox.append("order.placed", {"id": number})
        await outbox.wait_for_entries(50)
        entries = await outbox.claim(100, 30_000)
        assert len(entries) == 20
        for entry in entries:
            assert entry.lease_token is not None
            assert await outbox.mark_published(entry.id, entry.lease_token)
    finally:
        await outbox.close()
        await store.close()
        await engine.dispose()

    # Every server connection of the pool, through fresh clients: each round holds POOL_SIZE
    # transactions at once, so each runs on a server connection of its own.
    for _round in range(3):
        clients = await asyncio.gather(
            *(
                asyncpg.connect(_asyncpg_dsn(pgbouncer.url), statement_cache_size=0)
                for _ in range(POOL_SIZE)
            )
        )
        try:
            transactions = [client.transaction() for client in clients]
            await asyncio.gather(*(transaction.start() for transaction in transactions))
            states = await asyncio.gather(*(_session_state(client) for client in clients))
            pids = await asyncio.gather(
                *(client.fetchval("SELECT pg_backend_pid()") for client in clients)
            )
            await asyncio.gather(*(transaction.rollback() for transaction in transactions))
        finally:
            await asyncio.gather(*(client.close() for client in clients))
        assert len(set(pids)) == POOL_SIZE
        changed = [
            {name: value for name, value in state.items() if value != defaults[name]}
            for state in states
        ]
        assert [change for change in changed if change] == []


async def test_behind_pgbouncer_the_store_never_listens_and_says_once_that_it_polls(
    pgbouncer: PgBouncer, prefix: str
) -> None:
    store = SQLAlchemyJobStore(pgbouncer.url, table_prefix=prefix)
    try:
        with captured_logs("WARNING") as logs:
            for _ in range(3):
                await store.wait_for_work(["t"], 20)
        said = [log for log in logs if "pooler in transaction mode" in log["message"]]
        assert len(said) == 1
        assert "listen_url" in said[0]["message"]
        direct = await asyncpg.connect(_asyncpg_dsn(POSTGRES_URL))
        try:
            listens = await direct.fetchval(
                "SELECT count(*) FROM pg_stat_activity WHERE query = $1",
                f'LISTEN "{notify_channel("jobs", store.table.fullname)}"',
            )
        finally:
            await direct.close()
        assert listens == 0
    finally:
        await store.close()


async def test_listen_url_wakes_a_runner_behind_pgbouncer_at_once(
    pgbouncer: PgBouncer, prefix: str
) -> None:
    producer = SQLAlchemyJobStore(pgbouncer.url, table_prefix=prefix)
    worker = SQLAlchemyJobStore(pgbouncer.url, table_prefix=prefix, listen_url=POSTGRES_URL)
    try:
        await worker.wait_for_work(["t"], 1)  # listening, table made
        waiting = asyncio.create_task(worker.wait_for_work(["t"], 30_000))
        await asyncio.sleep(0.2)
        assert not waiting.done()
        started = time.monotonic()
        await producer.enqueue(new_request())
        await asyncio.wait_for(waiting, 5)
        assert time.monotonic() - started < 1.0  # not the 30 s fallback
    finally:
        await producer.close()
        await worker.close()


async def test_a_wakeup_that_never_comes_back_while_work_is_claimable_is_logged_once(
    prefix: str,
) -> None:
    # LISTEN on another database: the connection is fine, but no notification of the job
    # table's database ever reaches it, as with any path that drops notifications.
    elsewhere = make_url(POSTGRES_URL).set(database="postgres").render_as_string(False)
    store = SQLAlchemyJobStore(POSTGRES_URL, table_prefix=prefix, listen_url=elsewhere)
    try:
        with captured_logs("WARNING") as logs:
            await store.wait_for_work(["t"], 1)
            await store.enqueue(new_request())

            def reported() -> bool:
                return any("has not come back" in log["message"] for log in logs)

            async def waited() -> bool:
                await store.wait_for_work(["t"], 20)
                return reported()

            await wait_until(waited, timeout=10, message="the missing wake-up to be logged")
            for _ in range(3):
                await store.wait_for_work(["t"], 20)
        assert sum("has not come back" in log["message"] for log in logs) == 1
    finally:
        await store.close()
