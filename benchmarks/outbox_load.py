"""The outbox under load: 10 producers commit orders with entries while relay and runner deliver.

Each producer transaction inserts one order row and appends one outbox entry, for
``duration_s``; the relay (batches of 100) hands the entries to the job store (on the same
database, or on Redis) and the runner (concurrency 10) runs a handler that records when it
started. Measured after a warm-up of ``WARMUP_S`` (the producers already committing, pools filling,
statements being prepared; not counted): commit tx/s, end-to-end jobs/s (handlers started
over the time from the window's start to the last handler), commit-to-handler p50/p99 ms of
the transactions committed in the window.

The references, in the same run: the same transaction (one INSERT into an orders table and one
into an entries table, then COMMIT) with raw asyncpg on 10 connections, and with raw sqlite3
(WAL, synchronous=FULL) from 10 threads each with its own connection; and, to tell
SQLAlchemy's own cost from ours, the same two INSERTs through a plain SQLAlchemy session
(``async_sessionmaker(engine).begin()``, Core inserts, the engine from ``create_engine``) with
no outbox, relay or runner. Each also reports the process CPU per transaction (ours includes
the relay and runner running in the same process meanwhile), after the same warm-up.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import statistics
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import BigInteger, Column, Integer, MetaData, String, Table
from sqlalchemy.ext.asyncio import async_sessionmaker

from jobs import JobDriver
from orm_sqlalchemy import (
    SQLAlchemyJobStore,
    SQLAlchemyOutboxStore,
    SQLAlchemyTransactionManager,
    create_engine,
)

from .drivers import POSTGRES_URL, redis
from .outbox import database
from .outbox_worker import relay_and_runner

PRODUCERS = 10
WARMUP_S = 1.0


@dataclass(frozen=True, slots=True)
class LoadResult:
    commits_per_s: float
    delivered_per_s: float
    p50_ms: float
    p99_ms: float
    cpu_us_per_commit: float


@dataclass(frozen=True, slots=True)
class Rate:
    """Transactions per second and the process CPU per transaction (us) of a reference."""

    per_s: float
    cpu_us: float


class _CpuClock:
    def __init__(self) -> None:
        self._wall = time.perf_counter()
        self._cpu = time.process_time()

    def rate(self, done: int) -> Rate:
        wall = time.perf_counter() - self._wall
        cpu = time.process_time() - self._cpu
        return Rate(done / wall, cpu / max(done, 1) * 1e6)


async def outbox_under_load(
    kind: str, jobs_on: str, duration_s: float, *, worker_process: bool = False
) -> LoadResult:
    """``kind``: the outbox database (sqlite, postgres); ``jobs_on``: "same" or "redis";
    ``worker_process``: the relay and runner in a process of their own (``outbox_worker``),
    else in the producers' process. CPU per commit is the producers' process's."""
    async with database(kind) as (url, prefix), AsyncExitStack() as stack:
        engine = create_engine(url)
        stack.push_async_callback(engine.dispose)
        tm = SQLAlchemyTransactionManager(engine)
        metadata = MetaData()
        orders = _orders_table(prefix, metadata)
        outbox = SQLAlchemyOutboxStore(transaction_manager=tm, table_prefix=prefix)
        stack.push_async_callback(outbox.close)
        await outbox.create_schema()
        async with engine.begin() as conn:
            await conn.run_sync(metadata.create_all)
        if kind == "postgres":
            stack.push_async_callback(_drop, engine, orders)
        jobs: JobDriver
        namespace = f"bench-{uuid.uuid4().hex[:8]}"
        if jobs_on == "redis":
            jobs = await stack.enter_async_context(redis(namespace))
        else:
            store = SQLAlchemyJobStore(engine=engine, table_prefix=prefix)
            await store.create_schema()
            stack.push_async_callback(store.close)
            jobs = store
        committed_at: dict[int, float] = {}
        started_at: dict[int, float] = {}
        if worker_process:
            start, finish = await _worker_process(url, prefix, jobs_on, namespace, started_at)
        else:
            start, finish = _worker_here(jobs, outbox, started_at)
        await start()
        counter = iter(range(10**9))
        window = time.perf_counter() + WARMUP_S
        deadline = window + duration_s
        cpu_start = asyncio.get_running_loop().create_task(_cpu_at(window))

        async def produce() -> None:
            while time.perf_counter() < deadline:
                n = next(counter)
                async with tm.transaction() as session:
                    await session.execute(orders.insert().values(note=f"order {n}"))
                    await outbox.append("order.placed", {"n": n})
                committed_at[n] = time.perf_counter()

        try:
            await asyncio.gather(*(produce() for _ in range(PRODUCERS)))
            commit_time = time.perf_counter() - window
            commit_cpu = time.process_time() - await cpu_start
        finally:
            await finish(len(committed_at))
        measured = [n for n, at in committed_at.items() if at >= window]
        total = len(measured)
        delivered = [n for n in measured if n in started_at]
        latencies = sorted((started_at[n] - committed_at[n]) * 1000 for n in delivered)
        last = max((started_at[n] for n in delivered), default=window)
        return LoadResult(
            commits_per_s=total / commit_time,
            delivered_per_s=len(latencies) / (last - window),
            p50_ms=statistics.median(latencies) if latencies else float("nan"),
            p99_ms=latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))]
            if latencies
            else float("nan"),
            cpu_us_per_commit=commit_cpu / max(total, 1) * 1e6,
        )


async def sqlalchemy_rate(kind: str, duration_s: float) -> Rate:
    """The same transaction through a plain SQLAlchemy session: no outbox, relay or runner."""
    async with database(kind) as (url, prefix):
        engine = create_engine(url)
        metadata = MetaData()
        orders = _orders_table(prefix, metadata)
        entries = Table(
            f"{prefix}entries",
            metadata,
            Column("id", String(36), primary_key=True),
            Column("type", String(100), nullable=False),
            Column("payload", String, nullable=False),
            Column("created_at", BigInteger, nullable=False),
        )
        try:
            async with engine.begin() as conn:
                await conn.run_sync(metadata.create_all)
            sessions = async_sessionmaker(engine, expire_on_commit=False)

            async def transaction(_: int) -> None:
                async with sessions.begin() as session:
                    await session.execute(orders.insert().values(note="order"))
                    await session.execute(
                        entries.insert().values(
                            id=str(uuid.uuid4()),
                            type="order.placed",
                            payload='{"n": 1}',
                            created_at=int(time.time() * 1000),
                        )
                    )

            return await _timed(transaction, duration_s)
        finally:
            if kind == "postgres":
                async with engine.begin() as conn:
                    await conn.run_sync(metadata.drop_all)
            await engine.dispose()


_Phase = Callable[[], Awaitable[None]]


async def _timed(transaction: Callable[[int], Awaitable[None]], duration_s: float) -> Rate:
    """``PRODUCERS`` loops of ``transaction(producer)``: ``WARMUP_S`` not counted, then
    ``duration_s`` measured."""
    window = time.perf_counter() + WARMUP_S
    deadline = window + duration_s
    done = 0

    async def produce(producer: int) -> None:
        nonlocal done
        while (now := time.perf_counter()) < deadline:
            await transaction(producer)
            if now >= window:
                done += 1

    async def clock_at_window() -> _CpuClock:
        await asyncio.sleep(max(0.0, window - time.perf_counter()))
        return _CpuClock()

    clock = asyncio.get_running_loop().create_task(clock_at_window())
    await asyncio.gather(*(produce(producer) for producer in range(PRODUCERS)))
    return (await clock).rate(done)


async def _cpu_at(moment: float) -> float:
    """The process CPU time at ``moment`` (a ``perf_counter`` reading): the window's start."""
    await asyncio.sleep(max(0.0, moment - time.perf_counter()))
    return time.process_time()


def _orders_table(prefix: str, metadata: MetaData) -> Table:
    """The business row each producer transaction inserts beside its outbox entry."""
    return Table(
        f"{prefix}orders",
        metadata,
        Column("id", Integer, primary_key=True),
        Column("note", String(40), nullable=False),
    )


def _worker_here(
    jobs: JobDriver, outbox: SQLAlchemyOutboxStore, started_at: dict[int, float]
) -> tuple[_Phase, Callable[[int], Awaitable[None]]]:
    runner, relay = relay_and_runner(jobs, outbox, started_at)

    async def start() -> None:
        runner.start()
        relay.start()

    async def finish(total: int) -> None:
        try:
            wait_until = time.perf_counter() + 60
            while len(started_at) < total and time.perf_counter() < wait_until:  # noqa: ASYNC110
                await asyncio.sleep(0.01)
        finally:
            await runner.close()
            await relay.close()

    return start, finish


_RESULT_LINE_LIMIT = 64 * 1024 * 1024
"""The worker process answers with one JSON line of every handler's start time: at PostgreSQL
rates that is megabytes, past asyncio's default 64 KiB line limit."""


async def _worker_process(
    url: str, prefix: str, jobs_on: str, namespace: str, started_at: dict[int, float]
) -> tuple[_Phase, Callable[[int], Awaitable[None]]]:
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "benchmarks.outbox_worker", url, prefix, jobs_on, namespace,
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        limit=_RESULT_LINE_LIMIT,
    )
    assert process.stdin is not None
    assert process.stdout is not None
    stdin, stdout = process.stdin, process.stdout

    async def start() -> None:
        async with asyncio.timeout(30):
            line = await stdout.readline()
        if line.strip() != b"ready":
            process.kill()
            await process.wait()
            raise RuntimeError(f"the outbox worker process did not start: {line!r}")

    async def finish(total: int) -> None:
        try:
            stdin.write(f"{total}\n".encode())
            await stdin.drain()
            async with asyncio.timeout(90):
                line = await stdout.readline()
            started_at.update({int(n): at for n, at in json.loads(line).items()})
        finally:
            if process.returncode is None:
                async with asyncio.timeout(30):
                    await process.wait()

    return start, finish


async def _drop(engine: Any, orders: Table) -> None:
    async with engine.begin() as conn:
        await conn.run_sync(orders.metadata.drop_all)


async def raw_asyncpg_rate(duration_s: float) -> Rate:
    """Transactions per second: INSERT an order, INSERT an entry, COMMIT, on 10 connections."""
    import asyncpg  # type: ignore[import-untyped]

    dsn = POSTGRES_URL.replace("postgresql+asyncpg://", "postgresql://")
    suffix = uuid.uuid4().hex[:8]
    orders, entries = f"bench_raw_orders_{suffix}", f"bench_raw_entries_{suffix}"
    setup = await asyncpg.connect(dsn)
    await setup.execute(
        f"CREATE TABLE {orders} (id serial PRIMARY KEY, note text);"
        f"CREATE TABLE {entries} (id text PRIMARY KEY, type text, payload text, created_at "
        "bigint)"
    )
    connections = [await asyncpg.connect(dsn) for _ in range(PRODUCERS)]

    async def transaction(producer: int) -> None:
        connection = connections[producer]
        async with connection.transaction():
            await connection.execute(f"INSERT INTO {orders} (note) VALUES ($1)", "order")
            await connection.execute(
                f"INSERT INTO {entries} VALUES ($1, $2, $3, $4)",
                uuid.uuid4().hex,
                "order.placed",
                '{"n": 1}',
                int(time.time() * 1000),
            )

    try:
        return await _timed(transaction, duration_s)
    finally:
        for connection in connections:
            await connection.close()
        await setup.execute(f"DROP TABLE {orders}; DROP TABLE {entries}")
        await setup.close()


def raw_sqlite3_rate(duration_s: float) -> Rate:
    """Transactions per second: the same transaction with sqlite3 (WAL, synchronous=FULL),
    10 threads each with its own connection, waiting on the lock in SQLite's busy handler."""
    with tempfile.TemporaryDirectory() as scratch:
        path = str(Path(scratch) / "raw.db")
        setup = sqlite3.connect(path)
        setup.execute("PRAGMA journal_mode=WAL")
        setup.execute("CREATE TABLE orders (id INTEGER PRIMARY KEY, note TEXT)")
        setup.execute("CREATE TABLE entries (id TEXT PRIMARY KEY, type TEXT, payload TEXT, t INT)")
        setup.commit()
        setup.close()
        counts = [0] * PRODUCERS
        window = time.perf_counter() + WARMUP_S
        deadline = window + duration_s

        def produce(index: int) -> None:
            connection = sqlite3.connect(path, timeout=30, isolation_level=None)
            connection.execute("PRAGMA synchronous=FULL")
            while (now := time.perf_counter()) < deadline:
                connection.execute("BEGIN IMMEDIATE")
                connection.execute("INSERT INTO orders (note) VALUES (?)", ("order",))
                connection.execute(
                    "INSERT INTO entries VALUES (?, ?, ?, ?)",
                    (uuid.uuid4().hex, "order.placed", '{"n": 1}', int(time.time() * 1000)),
                )
                connection.execute("COMMIT")
                if now >= window:
                    counts[index] += 1
            connection.close()

        threads = [threading.Thread(target=produce, args=(i,)) for i in range(PRODUCERS)]
        for thread in threads:
            thread.start()
        time.sleep(max(0.0, window - time.perf_counter()))
        clock = _CpuClock()
        for thread in threads:
            thread.join()
        return clock.rate(sum(counts))
