"""What ``neverlost worker`` starts, in-process (the same WorkerProcess the command runs)."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from jobs import JOB_RUNNER, JOB_SCHEDULER, OUTBOX_RELAY, JobQueue
from jobs.cli.worker import WorkerOptions, WorkerProcess
from tests.cli import app as cli_app
from tests.stores import StoreTarget
from tests.support import wait_until

OUTBOX_APP = "tests.cli.app:CliOutboxApp"


@pytest.fixture(autouse=True)
def sqlite_target(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CLI_TEST_TARGET", StoreTarget.fresh("sqlite", tmp_path).to_json())


async def start(options: WorkerOptions) -> tuple[WorkerProcess, asyncio.Task[int]]:
    process = WorkerProcess(options)
    task = asyncio.create_task(process.run())
    ready = asyncio.create_task(process.ready.wait())
    await asyncio.wait({task, ready}, timeout=30, return_when=asyncio.FIRST_COMPLETED)
    if not process.ready.is_set():
        ready.cancel()
        task.cancel()
        raise AssertionError(f"the worker did not get ready: {task}")
    return process, task


async def test_by_default_the_worker_runs_the_relay_the_scheduler_and_the_apps_runner() -> None:
    process, task = await start(WorkerOptions(app=OUTBOX_APP))
    context = process.context
    assert context is not None
    assert context.get_value(OUTBOX_RELAY).is_running
    assert context.get_value(JOB_SCHEDULER).is_running
    assert process.runner is context.get_value(JOB_RUNNER)
    assert process.runner.is_running
    process.stop_requested.set()
    assert await asyncio.wait_for(task, 30) == 0
    assert context.is_closed


async def test_options_leave_out_the_relay_and_scheduler_and_shape_the_runner() -> None:
    options = WorkerOptions(
        app=OUTBOX_APP, relay=False, scheduler=False, concurrency=3, types=("cli.sleep", "cli.fail")
    )
    process, task = await start(options)
    context = process.context
    assert context is not None
    assert not context.get_value(OUTBOX_RELAY).is_running
    assert not context.get_value(JOB_SCHEDULER).is_running
    runner = process.runner
    assert runner is not None
    assert runner.is_running
    assert runner.settings.concurrency == 3
    assert runner.settings.lease_ms == 3_000  # the app's settings, with the override on top
    assert runner.registry.types == {"cli.sleep", "cli.fail"}
    assert not context.get_value(JOB_RUNNER).is_running  # the app's own runner stays idle
    process.stop_requested.set()
    assert await asyncio.wait_for(task, 30) == 0
    assert not runner.is_running


async def test_jobs_still_running_at_the_drain_timeout_are_handed_back_and_exit_is_0(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    driver = cli_app.SharedInProcessDriver()
    monkeypatch.setitem(cli_app.SHARED_STORE, "driver", driver)
    job_id = await JobQueue(driver).enqueue("cli.block", {})
    options = WorkerOptions(app="tests.cli.app:CliInProcessApp", drain_timeout_s=0.5)
    process, task = await start(options)
    assert process.runner is not None
    await wait_until(lambda: process.runner is not None and process.runner.in_flight == 1)
    started = time.monotonic()
    process.stop_requested.set()
    assert await asyncio.wait_for(task, 30) == 0
    assert 0.5 <= time.monotonic() - started < 10
    info = await driver.get_job(str(job_id))
    assert info is not None
    # released: pending at once, its attempt given back, no stall (no lease to wait out)
    assert (info.state, info.attempts, info.stalls) == ("pending", 0, 0)


async def test_queues_shape_the_runner_and_a_bad_list_is_a_usage_error() -> None:
    from click.testing import CliRunner

    from jobs.cli import cli
    from jobs.options import QueueWeights

    weights = QueueWeights(("critical", "default"), (3, 1))
    process, task = await start(WorkerOptions(app=OUTBOX_APP, queues=weights, scheduler=False))
    assert process.runner is not None
    assert process.runner.queues == weights
    process.stop_requested.set()
    assert await asyncio.wait_for(task, 30) == 0
    bad = CliRunner().invoke(cli, ["worker", OUTBOX_APP, "--queues", "a,a"])
    assert bad.exit_code == 2
    assert "names a queue twice" in bad.output
