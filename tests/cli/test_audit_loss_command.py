"""``neverlost audit-loss``: one pass with ``--once`` (exit 1 on a finding, ``--json``), on a
``--url`` store (the jobs) and on an APP with an outbox (the outbox too)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from click.testing import CliRunner, Result

from jobs import JobOutboxPublisher, JobQueue
from jobs.cli import cli
from orm_sqlalchemy import SQLAlchemyOutboxStore
from tests.cli.conftest import SpawnCli, cli_env
from tests.stores import StoreTarget
from tests.support import wait_until

OUTBOX_APP = "tests.cli.app:CliOutboxApp"


def _run(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


@pytest.fixture
def sqlite(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[StoreTarget]:
    target = StoreTarget.fresh("sqlite", tmp_path)
    monkeypatch.setenv("CLI_TEST_TARGET", target.to_json())  # CliOutboxApp's store
    yield target
    asyncio.run(target.drop())


def _url(target: StoreTarget) -> list[str]:
    return ["--url", target.url, "--table-prefix", target.namespace]


async def _enqueue_due(target: StoreTarget) -> None:
    driver = target.open()
    try:
        await JobQueue(driver).enqueue("audit.due", {})

        async def waited() -> bool:  # due for at least a millisecond, by the store's clock
            return ((await driver.stats())["audit.due"].oldest_due_age_ms or 0) > 0

        await wait_until(waited, timeout=10)
    finally:
        await driver.close()


def test_a_clean_store_exits_0_and_a_stuck_one_1_naming_the_type(sqlite: StoreTarget) -> None:
    asyncio.run(_enqueue_due(sqlite))
    clean = _run("audit-loss", "--once", *_url(sqlite))  # due for far less than 5 minutes
    assert clean.exit_code == 0, clean.output
    assert "ok: nothing lost or stuck" in clean.output
    stuck = _run("audit-loss", "--once", "--due-slo", "0s", "--json", *_url(sqlite))
    assert stuck.exit_code == 1, stuck.output
    report = json.loads(stuck.stdout)
    assert report["ok"] is False
    assert report["outbox_checked"] is False  # --url: the jobs alone
    [finding] = report["findings"]
    assert (finding["check"], finding["target"]) == ("due_no_worker", "type audit.due")
    assert "the audit found something lost or stuck" in stuck.stderr


async def _lose_a_published_entry(target: StoreTarget) -> str:
    """An entry of the APP's outbox published as a job, then the job deleted."""
    store = SQLAlchemyOutboxStore(target.url)  # the APP's table prefix: outbox_
    driver = target.open()
    try:
        async with store.transaction_manager.transaction():
            entry_id = await store.append("audit.lost", {})
        assert entry_id is not None
        entries = await store.claim(10, 60_000)
        await JobOutboxPublisher(JobQueue(driver)).publish_many(entries)
        await store.mark_published_many(entries)
        job = await driver.find_job(f"outbox:{entry_id}")
        assert job is not None
        assert await driver.delete(job.id)
        return entry_id
    finally:
        await driver.close()
        await store.close()


def test_an_app_with_an_outbox_has_its_published_entries_checked(sqlite: StoreTarget) -> None:
    entry_id = asyncio.run(_lose_a_published_entry(sqlite))
    done = _run("audit-loss", OUTBOX_APP, "--once", "--json")
    assert done.exit_code == 1, done.output
    report = json.loads(done.stdout)
    assert (report["outbox_checked"], report["entries_checked"]) == (True, 1)
    [finding] = report["findings"]
    assert (finding["check"], finding["target"]) == ("outbox_job_missing", f"entry {entry_id}")
    table = _run("audit-loss", OUTBOX_APP, "--once")
    assert table.exit_code == 1
    assert "outbox_job_missing" in table.output
    assert entry_id[:8] in table.output


def test_a_bad_slo_is_a_usage_error() -> None:
    done = _run("audit-loss", "--once", "--url", "sqlite+aiosqlite:///x.db", "--max-entries", "0")
    assert done.exit_code == 2


AUDIT_HEALTH_PORT = 6641  # this suite's private ports: 6600-6699


@pytest.mark.slow
async def test_a_worker_serves_the_auditors_health_red_while_a_finding_lasts(
    spawn_cli: SpawnCli, tmp_path: Path
) -> None:
    """A LossAuditService bean: `neverlost worker` runs it and /healthz carries its health."""
    target = StoreTarget.fresh("sqlite", tmp_path)
    worker = await spawn_cli(
        "worker", "tests.cli.app:CliAuditApp", "--health-port", str(AUDIT_HEALTH_PORT),
        "--health-host", "127.0.0.1", env=cli_env(target),
    )  # fmt: skip
    try:
        await worker.wait_for_log("worker ready")
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{AUDIT_HEALTH_PORT}") as http:

            async def health() -> dict[str, Any]:
                return dict((await http.get("/healthz")).json())

            async def auditor_is(healthy: bool) -> bool:
                auditor = (await health())["services"].get("loss auditor")
                return auditor is not None and auditor["healthy"] is healthy

            await wait_until(lambda: auditor_is(True), timeout=15, interval=0.1)
            driver = target.open()
            try:  # a type no worker serves, due at once past the app's due SLO of 0
                await JobQueue(driver).enqueue("audit.orphan", {})
            finally:
                await driver.close()
            await wait_until(lambda: auditor_is(False), timeout=15, interval=0.1)
            report = await health()
            assert report["healthy"] is False
            reasons = report["services"]["loss auditor"]["reasons"]
            assert any("due_no_worker type audit.orphan" in reason for reason in reasons)
        worker.signal()
        assert await worker.exit_code() == 0, worker.log_text()
    finally:
        await target.drop()
