"""SQLite specifics: WAL, the busy timeout, BEGIN IMMEDIATE and group commit in effect."""

from __future__ import annotations

import asyncio
import sqlite3
import sys
import threading
from collections.abc import Collection
from pathlib import Path
from typing import Any

from sqlalchemy import text

from jobs import JobHandlerRegistry, JobQueue, JobRunner, JobsSettings
from jobs.spi import ClaimedJob
from jobs.testing import new_request
from orm_sqlalchemy.store import SQLAlchemyJobStore
from tests.support import wait_until

from .support import StoreHarness

ROOT = Path(__file__).resolve().parents[3]


def _database_path(harness: StoreHarness) -> str:
    return harness.url.removeprefix("sqlite+aiosqlite:///")


async def test_the_file_is_in_wal_mode(sqlite_harness: StoreHarness) -> None:
    store = sqlite_harness.store()
    await store.enqueue(new_request())
    with sqlite3.connect(_database_path(sqlite_harness)) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)


async def test_a_held_write_lock_is_waited_for_not_failed(sqlite_harness: StoreHarness) -> None:
    store = sqlite_harness.store()
    await store.create_schema()
    locked, release = threading.Event(), threading.Event()

    def hold_the_write_lock() -> None:
        conn = sqlite3.connect(_database_path(sqlite_harness), isolation_level=None)
        conn.execute("BEGIN IMMEDIATE")
        locked.set()
        release.wait(5)
        conn.execute("COMMIT")
        conn.close()

    holder = threading.Thread(target=hold_the_write_lock)
    holder.start()
    try:
        assert await asyncio.to_thread(locked.wait, 5)
        enqueues = asyncio.gather(*(store.enqueue(new_request()) for _ in range(5)))
        done, _ = await asyncio.wait({enqueues}, timeout=0.3)
        assert not done, "the store wrote while another connection held the write lock"
        release.set()
        assert None not in await asyncio.wait_for(enqueues, timeout=5)
    finally:
        release.set()
        await asyncio.to_thread(holder.join)


async def test_two_stores_writing_at_once_never_see_a_locked_database(
    sqlite_harness: StoreHarness,
) -> None:
    first, second = sqlite_harness.store(), sqlite_harness.store()
    await first.create_schema()

    async def produce_and_drain(store: SQLAlchemyJobStore) -> int:
        await asyncio.gather(*(store.enqueue(new_request()) for _ in range(100)))
        done = 0
        while batch := await store.claim(7, 30_000, ["t"]):
            results = await asyncio.gather(
                *(store.complete(job.id, job.lease_token) for job in batch)
            )
            done += sum(results)
        return done

    counts = await asyncio.gather(produce_and_drain(first), produce_and_drain(second))
    assert sum(counts) == 200
    assert (await first.counts())["completed"] == 200


async def test_a_transaction_on_the_stores_engine_runs_beside_its_writes(
    sqlite_harness: StoreHarness,
) -> None:
    store = sqlite_harness.store()
    await store.create_schema()
    table = sqlite_harness.table

    async def read_then_write() -> None:
        async with store.engine.begin() as conn:
            await conn.execute(text(f'SELECT count(*) FROM "{table}"'))
            await asyncio.sleep(0.01)
            await conn.execute(
                text(
                    f'INSERT INTO "{table}" (id, type, payload, state, attempts, max_attempts,'
                    " run_at, created_at) VALUES (:id, 'x', 'null', 'failed', 1, 1, 0, 0)"
                ),
                {"id": new_request().id},
            )

    await asyncio.gather(
        *(read_then_write() for _ in range(5)),
        *(store.enqueue(new_request()) for _ in range(20)),
    )
    assert sum((await store.counts()).values()) == 25


async def test_two_processes_writing_at_once_never_see_a_locked_database(
    sqlite_harness: StoreHarness,
) -> None:
    await sqlite_harness.store().create_schema()
    processes = [
        await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "tests.integration.sql_store.sqlite_writer",
            sqlite_harness.url,
            sqlite_harness.prefix,
            "300",
            cwd=ROOT,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        for _ in range(2)
    ]
    outputs = [await asyncio.wait_for(p.communicate(), timeout=60) for p in processes]
    for process, (_, stderr) in zip(processes, outputs, strict=True):
        assert process.returncode == 0, stderr.decode()
    assert sum(int(stdout) for stdout, _ in outputs) == 600
    assert (await sqlite_harness.store().counts())["completed"] == 600


async def test_a_waiting_store_wakes_on_a_commit_through_another_connection(
    sqlite_harness: StoreHarness,
) -> None:
    """As a worker process's store does when the app's process enqueues: no LISTEN on SQLite,
    the file's data_version moves."""
    worker_side = sqlite_harness.store()
    app_side = sqlite_harness.store()  # its own engine: another process's connections
    await worker_side.create_schema()
    assert await worker_side.claim(10, 30_000, ["t"]) == []
    waiter = asyncio.create_task(worker_side.wait_for_work(["t"], 30_000))
    await asyncio.sleep(0.2)
    assert not waiter.done()  # an idle file does not wake it
    request = new_request()
    await app_side.enqueue(request)
    async with asyncio.timeout(5):  # well inside the 30 s poll
        await waiter
    [job] = await worker_side.claim(10, 30_000, ["t"])
    assert job.id == request.id


async def test_a_runner_is_not_woken_by_its_own_commits(sqlite_harness: StoreHarness) -> None:
    """The settles (and claims) of a runner's jobs move the file's data_version for its
    watch too; waking on them, it claimed for nothing after each (6 empty claims for these
    5 jobs before the watch left the engine's own commits out)."""
    store = sqlite_harness.store()
    await store.create_schema()
    claims: list[int] = []
    claim = store.claim

    async def counted(limit: int, lease_ms: int, types: Collection[str]) -> list[ClaimedJob]:
        jobs = await claim(limit, lease_ms, types)
        claims.append(len(jobs))
        return jobs

    async def handler(payload: Any) -> None:
        await asyncio.sleep(payload["s"])

    store.claim = counted  # type: ignore[method-assign]
    registry = JobHandlerRegistry()
    registry.register("t", handler)
    runner = JobRunner(store, registry, JobsSettings(poll_interval_ms=30_000))
    runner.start()
    queue = JobQueue(store)
    try:
        await queue.enqueue("t", {"s": 0})  # the watch has read the version once
        await wait_until(lambda: runner.stats["completed"] == 1, message="the first job done")
        await asyncio.sleep(0.2)
        claims.clear()
        for seconds in (0.1, 0.2, 0.3, 0.4, 0.5):
            await queue.enqueue("t", {"s": seconds})
        await wait_until(lambda: runner.stats["completed"] == 6, message="the jobs done")
        await asyncio.sleep(1.0)  # the idle window the count is over
    finally:
        await runner.close()
    assert claims.count(0) <= 2, claims
