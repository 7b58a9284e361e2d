"""``neverlost worker`` as a real process: drains on SIGTERM, a second signal exits 1, burst."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from jobs import JobQueue
from tests.cli.conftest import APP, SpawnCli, cli_env, read_ledger
from tests.stores import StoreTarget
from tests.support import wait_until


async def test_a_worker_drains_its_jobs_and_exits_0_on_sigterm_with_nothing_active(
    store_target: StoreTarget, spawn_cli: SpawnCli, tmp_path: Path
) -> None:
    ledger = tmp_path / "ledger.jsonl"
    driver = store_target.open()
    try:
        queue = JobQueue(driver)
        quick = [await queue.enqueue("cli.sleep", {"ms": 10}) for _ in range(20)]
        worker = await spawn_cli(
            "worker", APP, "--concurrency", "4", env=cli_env(store_target, ledger)
        )
        await worker.wait_for_log("worker ready")
        await wait_until(
            lambda: _all_in(driver, quick, "completed"), timeout=30, message="20 jobs completed"
        )
        slow = await queue.enqueue("cli.sleep", {"ms": 1_500})
        await wait_until(
            lambda: any(e["job"] == slow for e in read_ledger(ledger)), timeout=15, message="start"
        )
        worker.signal(signal.SIGTERM)
        assert await worker.exit_code() == 0, worker.log_text()
        slow_info = await driver.get_job(str(slow))
        assert slow_info is not None
        assert slow_info.state == "completed"
        assert (await driver.counts())["active"] == 0
        assert "worker stopped" in worker.log_text()
    finally:
        await driver.close()


async def _all_in(driver: object, ids: list[str | None], state: str) -> bool:
    for job_id in ids:
        info = await driver.get_job(str(job_id))  # type: ignore[attr-defined]
        if info is None or info.state != state:
            return False
    return True


@pytest.mark.parametrize("store_target", ["sqlite"], indirect=True)
async def test_a_second_signal_cancels_the_jobs_in_flight_and_exits_1(
    store_target: StoreTarget, spawn_cli: SpawnCli, tmp_path: Path
) -> None:
    ledger = tmp_path / "ledger.jsonl"
    driver = store_target.open()
    try:
        job_id = await JobQueue(driver).enqueue("cli.block", {})
        worker = await spawn_cli(
            "worker", APP, "--drain-timeout", "60", env=cli_env(store_target, ledger)
        )
        await wait_until(lambda: len(read_ledger(ledger)) == 1, timeout=30, message="job started")
        worker.signal(signal.SIGTERM)
        await worker.wait_for_log("draining")
        assert worker.process.returncode is None  # still draining the blocked job
        worker.signal(signal.SIGINT)
        assert await worker.exit_code() == 1, worker.log_text()
        info = await driver.get_job(str(job_id))
        assert info is not None
        assert info.state == "active"
        assert info.attempts == 1
    finally:
        await driver.close()
