"""``neverlost worker --burst``: runs what is due for its types, then exits 0 by itself.

In-process (the WorkerProcess the command runs) on CliInProcessApp's reference store, and as a
process on the durable stores whose drivers implement ``stats()`` (DURABLE_WITH_OPERATIONS).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from jobs import JobQueue
from jobs.cli.worker import WorkerOptions, WorkerProcess
from orm_sqlalchemy import SQLAlchemyOutboxStore, SQLAlchemyTransactionManager, create_engine
from tests.cli import app as cli_app
from tests.cli.conftest import APP, DURABLE_WITH_OPERATIONS, SpawnCli, cli_env, read_ledger
from tests.stores import StoreTarget
from tests.support import captured_logs

ENTRIES = 30


async def test_burst_runs_the_due_jobs_of_its_types_and_exits_0_leaving_the_rest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CLI_TEST_TARGET", StoreTarget.fresh("sqlite", tmp_path).to_json())
    driver = cli_app.SharedInProcessDriver()
    monkeypatch.setitem(cli_app.SHARED_STORE, "driver", driver)
    queue = JobQueue(driver)
    due = [await queue.enqueue("cli.sleep", {"ms": 20}) for _ in range(8)]
    later = await queue.enqueue("cli.sleep", {}, delay_ms=3_600_000)
    other = await queue.enqueue("cli.fail", {})  # handled by the app, not by this worker's --types
    options = WorkerOptions(
        app="tests.cli.app:CliInProcessApp",
        burst=True,
        types=("cli.sleep",),
        concurrency=3,
        scheduler=False,
    )
    with captured_logs("INFO") as logs:
        assert await asyncio.wait_for(WorkerProcess(options).run(), 30) == 0
    assert any("burst: nothing due" in record["message"] for record in logs)
    states = [(await driver.get_job(str(job_id))) for job_id in [*due, later, other]]
    assert [info.state if info else None for info in states] == [
        *["completed"] * 8, "pending", "pending",
    ]  # fmt: skip


@pytest.mark.parametrize("store_target", DURABLE_WITH_OPERATIONS, indirect=True)
async def test_the_burst_command_exits_0_once_its_due_jobs_ran_on_a_durable_store(
    store_target: StoreTarget, spawn_cli: SpawnCli, tmp_path: Path
) -> None:
    driver = store_target.open()
    try:
        queue = JobQueue(driver)
        due = [await queue.enqueue("cli.sleep", {"ms": 20}) for _ in range(8)]
        later = await queue.enqueue("cli.sleep", {}, delay_ms=3_600_000)
        worker = await spawn_cli(
            "worker", APP, "--burst", "--types", "cli.sleep", "--no-scheduler",
            env=cli_env(store_target, tmp_path / "ledger.jsonl"),
        )  # fmt: skip
        assert await worker.exit_code(timeout=60) == 0, worker.log_text()
        assert "burst: nothing due" in worker.log_text()
        infos = [await driver.get_job(str(job_id)) for job_id in [*due, later]]
        assert [info.state if info else None for info in infos] == [*["completed"] * 8, "pending"]
    finally:
        await driver.close()


async def test_burst_relays_the_waiting_outbox_entries_and_runs_their_jobs_before_it_exits(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = StoreTarget.fresh("sqlite", tmp_path)
    ledger = tmp_path / "ledger.jsonl"
    monkeypatch.setenv("CLI_TEST_TARGET", target.to_json())
    monkeypatch.setenv("CLI_TEST_LEDGER", str(ledger))
    engine = create_engine(target.url)
    try:
        tm = SQLAlchemyTransactionManager(engine)
        outbox = SQLAlchemyOutboxStore(transaction_manager=tm)
        await outbox.create_schema()
        async with tm.transaction():
            for _ in range(ENTRIES):
                await outbox.append("cli.sleep", {"ms": 0})
        await outbox.close()
    finally:
        await engine.dispose()
    options = WorkerOptions(app="tests.cli.app:CliOutboxApp", burst=True, scheduler=False)
    with captured_logs("INFO") as logs:
        assert await asyncio.wait_for(WorkerProcess(options).run(), 30) == 0
    assert any("burst: nothing due" in record["message"] for record in logs)
    ended = [line["job"] for line in read_ledger(ledger) if line["event"] == "end"]
    assert len(set(ended)) == ENTRIES
