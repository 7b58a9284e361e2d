"""At least once, across real processes, on every durable store (SQLite, PostgreSQL, Redis)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from jobs import JobDriver, JobQueue
from tests.processes.conftest import SpawnWorker, read_ledger
from tests.stores import StoreTarget
from tests.support import wait_until


async def state(driver: JobDriver, job_id: str) -> tuple[str, int, str | None]:
    info = await driver.get_job(job_id)
    assert info is not None
    return info.state, info.attempts, info.last_error


async def test_a_job_of_a_killed_worker_is_reclaimed_after_its_lease(
    store_target: StoreTarget, spawn_worker: SpawnWorker, tmp_path: Path
) -> None:
    ledger = tmp_path / "ledger.jsonl"
    driver = store_target.open()
    try:
        job_id = await JobQueue(driver).enqueue("ledger.block", {})
        assert job_id is not None
        first = await spawn_worker(store_target, ledger, lease_ms=1_000)
        await wait_until(lambda: len(read_ledger(ledger)) == 1, timeout=15, message="attempt 1")
        first.kill()
        await first.process.wait()
        second = await spawn_worker(store_target, ledger, lease_ms=1_000)
        await wait_until(
            lambda: _state_is(driver, job_id, "completed"), timeout=20, message="reclaimed"
        )
        assert (await state(driver, job_id))[:2] == ("completed", 1)  # a stall, no attempt
        entries = read_ledger(ledger)
        assert [(e["event"], e["attempt"], e["pid"]) for e in entries] == [
            ("start", 1, first.pid),
            ("start", 1, second.pid),
            ("end", 1, second.pid),
        ]
        assert await second.stop() == 0
    finally:
        await driver.close()


REPORTS_RECLAIMED: set[str] = {"sqlite", "postgres", "pgbouncer", "redis"}
"""Stores whose driver sets ClaimedJob.reclaimed (the operations SPI, issue 10): all of them."""


async def test_a_worker_killed_on_the_last_attempt_costs_a_stall_and_the_job_runs_again(
    store_target: StoreTarget, spawn_worker: SpawnWorker, tmp_path: Path
) -> None:
    """This process has no handler for ledger.once, so it stores the default 3 attempts; the
    worker's handler allows 1. A worker killed (SIGKILL) on that attempt is a stall, not an
    attempt: the next worker runs attempt 1 again, and the job completes."""
    if store_target.kind not in REPORTS_RECLAIMED:
        pytest.skip("ClaimedJob.reclaimed not yet implemented on this driver (issue 10)")
    ledger = tmp_path / "ledger.jsonl"
    driver = store_target.open()
    try:
        job_id = await JobQueue(driver).enqueue("ledger.once", {})
        assert job_id is not None
        assert (await state(driver, job_id))[:2] == ("pending", 0)
        first = await spawn_worker(store_target, ledger, lease_ms=1_000)
        await wait_until(lambda: len(read_ledger(ledger)) == 1, timeout=15, message="attempt 1")
        first.kill()
        await first.process.wait()
        second = await spawn_worker(store_target, ledger, lease_ms=1_000)

        async def finished() -> bool:
            return (await state(driver, job_id))[0] in ("failed", "completed")

        await wait_until(finished, timeout=20, message="the reclaim settled")
        assert await state(driver, job_id) == ("completed", 1, None)
        info = await driver.get_job(job_id)
        assert info is not None
        assert info.stalls == 1
        events = [(e["event"], e["attempt"]) for e in read_ledger(ledger)]
        assert events == [("start", 1), ("start", 1), ("end", 1)]
        assert await second.stop() == 0
    finally:
        await driver.close()


CANCELS: set[str] = {"sqlite", "postgres", "pgbouncer", "redis"}
"""Stores whose driver implements cancel (the operations SPI, issue 10)."""


async def test_cancelling_a_running_job_interrupts_its_handler_in_the_worker(
    store_target: StoreTarget, spawn_worker: SpawnWorker, tmp_path: Path
) -> None:
    if store_target.kind not in CANCELS:
        pytest.skip("cancel not yet implemented on this driver (issue 10)")
    ledger = tmp_path / "ledger.jsonl"
    driver = store_target.open()
    try:
        queue = JobQueue(driver)
        job_id = await queue.enqueue("ledger.wait", {})
        assert job_id is not None
        worker = await spawn_worker(store_target, ledger, lease_ms=900)  # beats every 300 ms
        await wait_until(lambda: len(read_ledger(ledger)) == 1, timeout=15, message="started")
        assert await queue.cancel(job_id)
        await wait_until(lambda: len(read_ledger(ledger)) == 2, timeout=5, message="interrupted")
        assert [e["event"] for e in read_ledger(ledger)] == ["start", "stopped:cancelled"]
        assert await worker.stop() == 0
        assert (await state(driver, job_id))[:2] == ("cancelled", 1)
    finally:
        await driver.close()


async def _state_is(driver: JobDriver, job_id: str, expected: str) -> bool:
    return (await state(driver, job_id))[0] == expected


async def test_a_stale_worker_cannot_settle_a_job_another_worker_reclaimed(
    store_target: StoreTarget, spawn_worker: SpawnWorker, tmp_path: Path
) -> None:
    ledger = tmp_path / "ledger.jsonl"
    driver = store_target.open()
    try:
        job_id = await JobQueue(driver).enqueue("ledger.stale", {"block_ms": 30_000})
        assert job_id is not None
        stale = await spawn_worker(store_target, ledger, lease_ms=600)
        await wait_until(lambda: len(read_ledger(ledger)) == 1, timeout=15, message="attempt 1")
        fresh = await spawn_worker(store_target, ledger, lease_ms=600)
        await wait_until(lambda: _state_is(driver, job_id, "completed"), timeout=20)
        await wait_until(
            lambda: any(e["event"] == "woke" for e in read_ledger(ledger)), timeout=15
        )
        assert await stale.stop() == 0  # its late retry was refused, after which it drained
        assert await state(driver, job_id) == ("completed", 1, None)
        events = [(e["event"], e["attempt"], e["pid"]) for e in read_ledger(ledger)]
        assert ("end", 1, fresh.pid) in events
        assert ("woke", 1, stale.pid) in events
        assert await fresh.stop() == 0
    finally:
        await driver.close()


@pytest.mark.parametrize("jobs", [1_000])
async def test_three_workers_run_each_job_exactly_once(
    store_target: StoreTarget, spawn_worker: SpawnWorker, tmp_path: Path, jobs: int
) -> None:
    ledger = tmp_path / "ledger.jsonl"
    driver = store_target.open()
    try:
        workers = [await spawn_worker(store_target, ledger, concurrency=8) for _ in range(3)]
        queue = JobQueue(driver)
        ids = [await queue.enqueue("ledger.sleep", {"ms": 1}) for _ in range(jobs)]
        await wait_until(
            lambda: _all_done(driver), timeout=60, interval=0.1, message="every job completed"
        )
        starts = Counter(e["job"] for e in read_ledger(ledger) if e["event"] == "start")
        assert set(starts) == set(ids)
        assert set(starts.values()) == {1}
        assert len({e["pid"] for e in read_ledger(ledger)}) >= 2  # they ran side by side
        for worker in workers:
            assert await worker.stop() == 0
    finally:
        await driver.close()


async def _all_done(driver: JobDriver) -> bool:
    counts = await driver.counts()
    return counts["pending"] == 0 and counts["active"] == 0
