"""``neverlost worker module:factory``: a worker from a function returning a ``jobs.Worker``.

The real console script runs ``tests.cli.worker_factory:build`` (plain handler functions, no
DI container): it runs enqueued jobs, relays an outbox entry an app's own sync session wrote
(``append_in``), drains on SIGTERM; the operator commands read the same store through the
factory; a factory that returns something else is a one-line usage error.
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from sqlalchemy.orm import Session

from jobs import SyncJobQueue, Worker, job_handler
from jobs.cli import cli
from orm_sqlalchemy import SQLAlchemyOutboxStore, create_sync_engine
from tests.cli.conftest import SpawnCli, cli_env, read_ledger
from tests.stores import StoreTarget
from tests.support import wait_until

FACTORY = "tests.cli.worker_factory:build"
KINDS = [
    pytest.param("sqlite", id="sqlite"),
    pytest.param("postgres", id="postgres", marks=pytest.mark.postgres),
    pytest.param("redis", id="redis", marks=pytest.mark.redis),
]


@pytest.fixture(params=KINDS)
async def target(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[StoreTarget]:
    store = StoreTarget.fresh(request.param, tmp_path)
    yield store
    await store.drop()


@pytest.fixture(params=KINDS)
def sync_target(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[StoreTarget]:
    """``target`` for a test that runs the commands in-process (each its own asyncio.run)."""
    store = StoreTarget.fresh(request.param, tmp_path)
    yield store
    asyncio.run(store.drop())


def _sync_queue(target: StoreTarget) -> SyncJobQueue:
    if target.kind == "redis":
        return SyncJobQueue(target.url, namespace=target.namespace)
    return SyncJobQueue(target.url, table_prefix=target.namespace)


async def test_the_console_script_runs_a_workers_handlers_and_drains(
    target: StoreTarget, spawn_cli: SpawnCli, tmp_path: Path
) -> None:
    ledger = tmp_path / "ledger.jsonl"
    worker = await spawn_cli("worker", FACTORY, env=cli_env(target, ledger))
    await worker.wait_for_log("worker ready: factory.greet, factory.receipt")

    def produce() -> None:
        with _sync_queue(target) as queue:
            queue.enqueue("factory.greet", {"name": "ada"})
            queue.enqueue("factory.receipt", {"invoice": 7})

    await asyncio.to_thread(produce)
    events = {"greet ada", "receipt 7"}
    await wait_until(
        lambda: {line["event"] for line in read_ledger(ledger)} >= events,
        timeout=30,
        message="both jobs ran in the worker process",
    )
    worker.signal(signal.SIGTERM)
    assert await worker.exit_code() == 0, worker.log_text()


@pytest.mark.parametrize(
    "kind",
    ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)],
)
async def test_the_factorys_outbox_relays_an_entry_a_sync_session_wrote(
    kind: str, spawn_cli: SpawnCli, tmp_path: Path
) -> None:
    target = StoreTarget.fresh(kind, tmp_path)
    ledger = tmp_path / "ledger.jsonl"
    try:
        worker = await spawn_cli("worker", FACTORY, env=cli_env(target, ledger))
        await worker.wait_for_log("worker ready")

        def app_transaction() -> None:
            outbox = SQLAlchemyOutboxStore(target.url, table_prefix=f"{target.namespace}outbox_")
            engine = create_sync_engine(target.url)
            try:
                with Session(engine) as session, session.begin():
                    outbox.append_in(session, "factory.receipt", {"invoice": 42})
            finally:
                asyncio.run(outbox.close())  # its NOTIFY sent, on the engine, before disposal
                engine.dispose()

        await asyncio.to_thread(app_transaction)
        await wait_until(
            lambda: "receipt 42" in {line["event"] for line in read_ledger(ledger)},
            timeout=30,
            message="the worker relayed the entry and ran its job",
        )
        worker.signal(signal.SIGTERM)
        assert await worker.exit_code() == 0, worker.log_text()
    finally:
        await target.drop()


def test_the_operator_commands_take_the_factory(
    sync_target: StoreTarget, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CLI_TEST_TARGET", sync_target.to_json())
    with _sync_queue(sync_target) as queue:
        queue.enqueue("factory.greet", {"name": "grace"}, key="greet:grace")
    runner = CliRunner()
    stats = runner.invoke(cli, ["stats", FACTORY, "--json"], catch_exceptions=False)
    assert stats.exit_code == 0, stats.output
    assert '"factory.greet"' in stats.stdout
    listed = runner.invoke(cli, ["jobs", "list", FACTORY, "--json"], catch_exceptions=False)
    assert listed.exit_code == 0, listed.output
    assert "greet:grace" in listed.stdout


def test_a_factory_that_returns_no_worker_is_a_usage_error() -> None:
    result = CliRunner().invoke(cli, ["stats", "tests.cli.worker_factory:not_a_worker"])
    assert result.exit_code == 2
    assert "returned a dict, not a jobs.Worker" in result.output


def test_a_worker_checks_its_handlers_when_it_is_made(tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'jobs.db'}"

    @job_handler("twice")
    def first(payload: object) -> None: ...

    @job_handler("twice")
    def second(payload: object) -> None: ...

    with pytest.raises(Exception, match="twice"):
        Worker(driver=url, handlers=[first, second])
    with pytest.raises(TypeError, match="handles no job type"):
        Worker(driver=url, handlers=[lambda payload: None])
    with pytest.raises(TypeError, match="a pair is"):
        Worker(driver=url, handlers=[("t",)])
    with pytest.raises(ValueError, match=r"Worker\(driver=...\): .*'mysql'"):
        Worker(driver="mysql://db/app")
