"""Every operator command on a store with known contents prints what the store holds.

The commands run in-process through click's CliRunner (the same code the console script runs),
through an APP (``CliInProcessApp``, on the reference driver kept open across commands) and
through ``--url`` on fresh durable stores. The contents are made through the driver SPI, so
every state is one the store reached itself.

The durable stores are those of DURABLE_WITH_OPERATIONS (conftest): the drivers that implement
the operations SPI (issue 10).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from click.testing import CliRunner, Result

from jobs import JobDriver, JobQueue
from jobs.cli import cli
from jobs.spi import ProgressReports, WorkerRegistration
from tests.cli import app as cli_app
from tests.cli.conftest import APP, DURABLE_WITH_OPERATIONS
from tests.stores import STORE_KINDS, StoreTarget

IN_PROCESS_APP = "tests.cli.app:CliInProcessApp"
OPERATION_STORES = [
    pytest.param("inprocess", id="inprocess"),
    *(kind for kind in STORE_KINDS if kind.values[0] in DURABLE_WITH_OPERATIONS),
]

ERROR = "RuntimeError: the mail provider said no"
RESULT = {"done1": {"sent": 1, "to": ["a@b.c"]}, "done2": None}


@dataclass
class Store:
    target: StoreTarget | None  # None: the in-process store of IN_PROCESS_APP
    ids: dict[str, str]

    def args(self) -> list[str]:
        if self.target is None:
            return [IN_PROCESS_APP]
        option = "--namespace" if self.target.kind == "redis" else "--table-prefix"
        return ["--url", self.target.url, option, self.target.namespace]

    def run(self, *args: str, input: str | None = None) -> Result:
        return CliRunner().invoke(cli, [*args, *self.args()], input=input, catch_exceptions=False)

    def json(self, *args: str) -> Any:
        result = self.run(*args, "--json")
        assert result.exit_code == 0, result.output
        return json.loads(result.stdout)


async def _settle(driver: JobDriver, job_type: str, how: str, result: str | None = None) -> None:
    (claimed,) = await driver.claim(1, 30_000, [job_type])
    if result is not None:
        assert isinstance(driver, ProgressReports)
        assert await driver.set_progress(claimed.id, claimed.lease_token, '[1,"all sent"]')
    if how == "complete":
        assert await driver.complete(claimed.id, claimed.lease_token, result)
    else:
        assert await driver.fail(claimed.id, claimed.lease_token, error=ERROR)


async def _populate(driver: JobDriver) -> dict[str, str]:
    """Two completed, one failed, one due (keyed), one scheduled, one cancelled, one unserved."""
    queue = JobQueue(driver)
    ids: dict[str, str] = {}
    try:
        for name in ("done1", "done2"):
            ids[name] = str(await queue.enqueue("cli.sleep", {"job": name}))
            result = RESULT[name]
            await _settle(driver, "cli.sleep", "complete", result and json.dumps(result))
        ids["failed"] = str(await queue.enqueue("cli.fail", {"order": 7}, max_attempts=1))
        await _settle(driver, "cli.fail", "fail")
        ids["due"] = str(await queue.enqueue("cli.sleep", {"job": "due"}, key="receipt:7"))
        ids["later"] = str(await queue.enqueue("cli.sleep", {"job": "later"}, delay_ms=3_600_000))
        ids["cancelled"] = str(await queue.enqueue("cli.block", {"job": "cancel me"}))
        assert await queue.cancel(ids["cancelled"])
        ids["orphan"] = str(await queue.enqueue("cli.orphan", {"job": "nobody handles it"}))
    finally:
        await driver.close()
    return ids


@pytest.fixture(params=OPERATION_STORES)
def store(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Store]:
    monkeypatch.setenv("CLI_TEST_TARGET", StoreTarget.fresh("sqlite", tmp_path).to_json())
    if request.param == "inprocess":
        driver = cli_app.SharedInProcessDriver()
        monkeypatch.setitem(cli_app.SHARED_STORE, "driver", driver)
        yield Store(None, asyncio.run(_populate(driver)))
        return
    target = StoreTarget.fresh(request.param, tmp_path)
    try:
        yield Store(target, asyncio.run(_populate(target.open())))
    finally:
        asyncio.run(target.drop())


def test_stats_counts_each_type_and_flags_due_types_without_a_worker(store: Store) -> None:
    view = store.json("stats")
    rows = {row["type"]: row for row in view["types"]}
    numbers = ("due", "scheduled", "active", "completed", "failed", "cancelled")
    assert {t: tuple(r[n] for n in numbers) for t, r in rows.items()} == {
        "cli.block": (0, 0, 0, 0, 0, 1),
        "cli.fail": (0, 0, 0, 0, 1, 0),
        "cli.orphan": (1, 0, 0, 0, 0, 0),
        "cli.sleep": (1, 1, 0, 2, 0, 0),
    }
    assert {t for t, r in rows.items() if r["unserved"]} == {"cli.orphan", "cli.sleep"}
    assert rows["cli.sleep"]["oldest_due_age_ms"] >= 0
    assert view["workers"] == 0

    table = store.run("stats")
    assert table.exit_code == 0, table.output
    sleep_row = next(line for line in table.stdout.splitlines() if "cli.sleep" in line)
    assert [cell.strip() for cell in sleep_row.strip("│ ").split("│")][:7] == [
        "cli.sleep", "1", "1", "0", "2", "0", "0",
    ]  # fmt: skip
    assert "NO WORKER" in sleep_row
    assert "due but no live worker handles: cli.orphan, cli.sleep" in table.stdout


def test_jobs_list_and_show_print_the_jobs_as_stored(store: Store) -> None:
    failed = store.json("jobs", "list", "--state", "failed")
    assert [job["id"] for job in failed["jobs"]] == [store.ids["failed"]]
    assert failed["next_cursor"] is None
    assert failed["jobs"][0]["last_error"].startswith(ERROR)

    everything = store.json("jobs", "list", "--limit", "3")
    assert len(everything["jobs"]) == 3
    rest = store.json("jobs", "list", "--limit", "1000", "--cursor", everything["next_cursor"])
    listed = [job["id"] for job in everything["jobs"] + rest["jobs"]]
    assert sorted(listed) == sorted(store.ids.values())

    shown = store.json("jobs", "show", store.ids["failed"])
    assert shown["payload"] == {"order": 7}
    assert shown["state"] == "failed"
    assert (shown["attempts"], shown["max_attempts"]) == (1, 1)
    assert (shown["stalls"], shown["max_stalls"], shown["priority"]) == (0, 10, 0)
    assert [(e["attempt"], e["error"].splitlines()[0]) for e in shown["errors"]] == [(1, ERROR)]
    table = store.run("jobs", "show", store.ids["failed"])
    assert table.exit_code == 0, table.output
    assert any(
        "stalls" in line and "0 of 10" in line for line in table.stdout.splitlines()
    ), table.stdout
    assert any(
        "priority" in line and line.rstrip(" │").endswith("0") for line in table.stdout.splitlines()
    ), table.stdout
    assert datetime.fromisoformat(shown["created_at"]) <= datetime.now(UTC)
    assert store.json("jobs", "show", "--key", "receipt:7")["id"] == store.ids["due"]

    assert shown["result"] is None
    done = store.json("jobs", "show", store.ids["done1"])
    assert done["result"] == RESULT["done1"]
    assert store.json("jobs", "show", store.ids["done2"])["result"] is None
    done_table = store.run("jobs", "show", store.ids["done1"])
    assert done_table.exit_code == 0, done_table.output
    assert "result" in done_table.stdout
    assert '"to": [' in done_table.stdout, done_table.stdout
    assert done["progress"] == {"fraction": 1.0, "message": "all sent"}
    assert any("100% all sent" in line for line in done_table.stdout.splitlines())

    missing = store.run("jobs", "show", "no-such-job")
    assert missing.exit_code == 1
    assert missing.stderr.strip() == "Error: no job 'no-such-job'"


def test_retry_gives_a_failed_job_one_more_attempt_and_refuses_a_completed_one(
    store: Store,
) -> None:
    moved = store.json("retry", store.ids["failed"])
    assert moved == {"retried": [store.ids["failed"]], "refused": {}}
    job = store.json("jobs", "show", store.ids["failed"])
    assert (job["state"], job["max_attempts"]) == ("pending", 2)

    refused = store.run("retry", store.ids["done1"])
    assert refused.exit_code == 1
    assert f"not retried: {store.ids['done1']} (completed)" in refused.stderr


def test_retry_failed_moves_every_failed_job(store: Store) -> None:
    result = store.run("retry", "--failed", "--type", "cli.fail")
    assert result.exit_code == 0, result.output
    assert "1 job(s) retried" in result.stdout
    assert store.json("jobs", "list", "--state", "failed")["jobs"] == []


def test_cancel_cancels_a_pending_job(store: Store) -> None:
    assert store.json("cancel", store.ids["due"]) == {
        "cancelled": [store.ids["due"]],
        "refused": {},
    }
    assert store.json("jobs", "show", store.ids["due"])["state"] == "cancelled"


def test_purge_asks_first_and_prints_how_many_it_deleted(store: Store) -> None:
    declined = store.run("purge", "--state", "completed", input="n\n")
    assert declined.exit_code == 1
    assert len(store.json("jobs", "list", "--state", "completed")["jobs"]) == 2

    assert store.json("purge", "--state", "completed", "--older-than", "1h", "--yes") == {
        "purged": 0
    }
    done = store.run("purge", "--state", "completed", "--state", "cancelled", "--yes")
    assert done.exit_code == 0, done.output
    assert done.stdout.strip() == "purged 3 job(s)"
    assert store.json("jobs", "show", store.ids["due"])["state"] == "pending"  # untouched


def test_workers_and_healthcheck_without_a_live_worker(store: Store) -> None:
    assert store.json("workers") == {"workers": []}
    store_only = store.run("healthcheck", "--min-workers", "0")
    assert store_only.exit_code == 0, store_only.output
    assert store_only.stdout.startswith("healthy: ")
    unhealthy = store.run("healthcheck")
    assert unhealthy.exit_code == 1
    assert "0 live worker(s), 1 needed" in unhealthy.stderr


def test_workers_lists_a_live_worker_and_stats_no_longer_flags_its_types(store: Store) -> None:
    worker = WorkerRegistration(
        id="w-1", host="node-a", pid=4242, types=("cli.sleep",), concurrency=8, in_flight=2
    )
    asyncio.run(_register(store, worker))
    (listed,) = store.json("workers")["workers"]
    assert {k: listed[k] for k in ("id", "host", "pid", "types", "concurrency", "in_flight")} == {
        "id": "w-1", "host": "node-a", "pid": 4242, "types": ["cli.sleep"], "concurrency": 8,
        "in_flight": 2,
    }  # fmt: skip
    assert datetime.fromisoformat(listed["last_seen"]) <= datetime.now(UTC)
    rows = {row["type"]: row for row in store.json("stats")["types"]}
    assert {t for t, r in rows.items() if r["unserved"]} == {"cli.orphan"}
    healthy = store.run("healthcheck")
    assert healthy.exit_code == 0, healthy.output
    assert "1 live worker(s)" in healthy.stdout


async def _register(store: Store, worker: WorkerRegistration) -> None:
    driver = cli_app.SHARED_STORE["driver"] if store.target is None else store.target.open()
    try:
        await driver.register_worker(worker, 60_000)
    finally:
        await driver.close()


def test_schedules_lists_the_apps_schedules_with_their_next_occurrence(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CLI_TEST_TARGET", StoreTarget.fresh("sqlite", tmp_path).to_json())
    result = CliRunner().invoke(cli, ["schedules", APP, "--json"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    (schedule,) = json.loads(result.stdout)["schedules"]
    assert schedule["name"] == schedule["job"] == "cli.nightly"
    assert (schedule["cron"], schedule["timezone"]) == ("0 3 * * *", "Europe/Berlin")
    upcoming = datetime.fromisoformat(schedule["next"])
    assert upcoming > datetime.now(UTC)
    assert upcoming.astimezone(ZoneInfo("Europe/Berlin")).hour == 3


def test_jobs_show_names_the_workflow_and_the_parents_of_a_workflows_job(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from jobs import NewJob
    from jobs.workflow import chain

    driver = cli_app.SharedInProcessDriver()
    monkeypatch.setitem(cli_app.SHARED_STORE, "driver", driver)
    queue = JobQueue(driver)

    async def enqueue() -> tuple[str, str, str]:
        workflow_id = await queue.enqueue_workflow(
            chain(NewJob(type="cli.a", payload={}), NewJob(type="cli.b", payload={}))
        )
        info = await queue.get_workflow(workflow_id)
        assert info is not None
        first, second = (job.id for job in info.jobs)
        return workflow_id, first, second

    workflow_id, first, second = asyncio.run(enqueue())
    store = Store(None, {})
    shown = store.json("jobs", "show", second)
    assert (shown["workflow_id"], shown["depends_on"]) == (workflow_id, [first])
    table = store.run("jobs", "show", second)
    assert table.exit_code == 0, table.output
    assert any("workflow" in line and workflow_id in line for line in table.stdout.splitlines())
    assert any("after" in line and first in line for line in table.stdout.splitlines())

    view = store.json("workflows", "show", workflow_id)
    assert view["state"] == "running"
    assert [(job["id"], job["state"]) for job in view["jobs"]] == [
        (first, "pending"), (second, "pending"),
    ]  # fmt: skip
    listing = store.run("workflows", "show", workflow_id)
    assert listing.exit_code == 0, listing.output
    row = next(line for line in listing.stdout.splitlines() if "cli.b" in line)
    assert "#1" in row, listing.stdout
    missing = store.run("workflows", "show", "no-such-workflow")
    assert missing.exit_code == 1
    assert missing.stderr.strip() == "Error: no workflow 'no-such-workflow'"
