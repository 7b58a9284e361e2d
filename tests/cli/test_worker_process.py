"""``neverlost worker`` as a real process: drains on SIGTERM, a second signal exits 1, burst;
a handler calling ``sys.exit()`` or raising KeyboardInterrupt does not end it."""

from __future__ import annotations

import asyncio
import json
import signal
from pathlib import Path

import pytest
from click.testing import CliRunner

from jobs import JobQueue
from jobs.cli import cli
from tests.cli.conftest import APP, DURABLE_WITH_OPERATIONS, SpawnCli, cli_env, read_ledger
from tests.stores import StoreTarget
from tests.support import wait_until

HAZARD_APP = "tests.cli.app:CliHazardApp"


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
        if store_target.kind in DURABLE_WITH_OPERATIONS:
            await _assert_listed(store_target, worker.process.pid)
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


async def _assert_listed(target: StoreTarget, pid: int) -> None:
    """``neverlost workers --json`` (in a thread: it runs its own event loop) lists the worker."""
    option = "--namespace" if target.kind == "redis" else "--table-prefix"
    args = ["workers", "--json", "--url", target.url, option, target.namespace]
    result = await asyncio.to_thread(CliRunner().invoke, cli, args, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    (listed,) = json.loads(result.stdout)["workers"]
    assert (listed["pid"], listed["concurrency"], listed["in_flight"]) == (pid, 4, 0)
    assert sorted(listed["types"]) == ["cli.block", "cli.fail", "cli.nightly", "cli.sleep"]


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
        # handed back to the store, due at once: the attempt given back, no stall counted
        assert (info.state, info.attempts, info.stalls) == ("pending", 0, 0)
    finally:
        await driver.close()


async def test_stats_watch_refreshes_until_interrupted_and_exits_0(
    spawn_cli: SpawnCli, tmp_path: Path
) -> None:
    env = cli_env(StoreTarget.fresh("sqlite", tmp_path))
    watch = await spawn_cli(
        "stats", "tests.cli.app:CliInProcessApp", "--watch", "--interval", "0.2", env=env
    )
    await wait_until(
        lambda: watch.log_text().count("jobs in SharedInProcessDriver") >= 3,
        timeout=30,
        interval=0.05,
        message="three refreshes",
    )
    watch.signal(signal.SIGINT)
    assert await watch.exit_code() == 0, watch.log_text()
    assert "Traceback" not in watch.log_text()


@pytest.mark.parametrize("store_target", ["sqlite", "redis"], indirect=True)
async def test_sys_exit_and_keyboard_interrupt_in_handlers_fail_their_jobs_and_the_worker_serves_on(
    store_target: StoreTarget, spawn_cli: SpawnCli, tmp_path: Path
) -> None:
    ledger = tmp_path / "ledger.jsonl"
    driver = store_target.open()
    try:
        queue = JobQueue(driver)
        worker = await spawn_cli(
            "worker", HAZARD_APP, "--concurrency", "4", env=cli_env(store_target, ledger)
        )
        await worker.wait_for_log("worker ready")
        beside = await queue.enqueue("cli.sleep", {"ms": 1_000})
        await wait_until(
            lambda: any(e["job"] == beside for e in read_ledger(ledger)), timeout=15,
            message="the job beside them started",
        )  # fmt: skip
        exits = await queue.enqueue("cli.exit", {})
        interrupts = await queue.enqueue("cli.interrupt", {})
        for job_id, raised in ((exits, "SystemExit(3)"), (interrupts, "KeyboardInterrupt()")):
            await wait_until(
                lambda j=job_id: _all_in(driver, [j], "failed"), timeout=15, message=raised
            )
            info = await driver.get_job(str(job_id))
            assert info is not None
            assert info.last_error is not None
            assert (info.attempts, info.max_attempts) == (1, 3)  # for good, at once
            assert info.last_error.startswith(f"HandlerExitError: the handler raised {raised}")
        await wait_until(
            lambda: _all_in(driver, [beside], "completed"), timeout=15, message="beside it"
        )
        assert worker.process.returncode is None
        after = await queue.enqueue("cli.sleep", {"ms": 10})
        await wait_until(
            lambda: _all_in(driver, [after], "completed"), timeout=15, message="a job after"
        )
        log = worker.log_text()
        assert log.count("failed for good") == 2, log
        worker.signal(signal.SIGTERM)
        assert await worker.exit_code() == 0, worker.log_text()
        assert (await driver.counts())["active"] == 0
    finally:
        await driver.close()
