"""``outbox.append_workflow``: a workflow written in the app's transaction as one entry, handed
over by the relay as one ``enqueue_workflow`` (the SQL job store on the same database), once."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from jobs import JobOutboxPublisher, JobQueue, ManualClock, OutboxRelay
from jobs.errors import PayloadError
from jobs.new_job import NewJob
from jobs.spi import WORKFLOW_ENTRY_TYPE, outbox_workflow_id
from jobs.workflow import Workflow, WorkflowError, chain, group
from orm_sqlalchemy import SQLAlchemyJobStore, SQLAlchemyOutboxStore, SQLAlchemyTransactionManager
from orm_sqlalchemy.factory import drop_prefixed_tables
from tests.integration.outbox.conftest import OutboxHarness

LEASE_MS = 30_000


class App:
    """An outbox and a job store on one database, with a relay to hand entries over."""

    def __init__(self, harness: OutboxHarness) -> None:
        self.harness = harness
        self.tm = SQLAlchemyTransactionManager(harness.engine())
        self.outbox: SQLAlchemyOutboxStore = harness.store(self.tm, clock=ManualClock())
        self.jobs = SQLAlchemyJobStore(engine=self.tm.engine, table_prefix=harness.prefix)
        self.queue = JobQueue(self.jobs)
        self.relay = OutboxRelay(self.outbox, JobOutboxPublisher(self.queue))

    async def close(self) -> None:
        await self.jobs.close()
        if self.harness.postgres:
            async with self.tm.engine.begin() as conn:
                await drop_prefixed_tables(conn, self.harness.prefix)


@pytest.fixture
async def app(harness: OutboxHarness) -> AsyncIterator[App]:
    application = App(harness)
    await harness.setup(application.outbox)
    await application.jobs.create_schema()
    yield application
    await application.close()


def _job(name: str) -> NewJob:
    return NewJob(type="t", payload={"name": name})


async def test_a_committed_workflow_is_handed_over_whole_and_a_rolled_back_one_never(
    app: App,
) -> None:
    async with app.tm.transaction():
        entry_id = await app.outbox.append_workflow(
            group(_job("a"), _job("b")).then(_job("zip"))
        )
    with pytest.raises(RuntimeError):
        await _append_then_fail(app, chain(_job("x"), _job("y")))
    assert entry_id is not None
    assert await app.harness.count() == 1
    assert await app.relay.relay_once() == 1
    info = await app.queue.get_workflow(outbox_workflow_id(entry_id))
    assert info is not None
    assert [job.payload["name"] for job in info.jobs] == ["a", "b", "zip"]
    assert info.jobs[2].depends_on == (info.jobs[0].id, info.jobs[1].id)
    assert sum((await app.jobs.counts()).values()) == 3
    claimed = await app.jobs.claim(10, LEASE_MS, ["t"])
    assert sorted(job.id for job in claimed) == sorted(job.id for job in info.jobs[:2])
    assert await app.jobs.complete_many([(job.id, job.lease_token) for job in claimed]) == [
        True,
        True,
    ]
    (callback,) = await app.jobs.claim(10, LEASE_MS, ["t"])
    assert callback.id == info.jobs[2].id


async def _append_then_fail(app: App, workflow: Workflow) -> None:
    async with app.tm.transaction():
        await app.outbox.append_workflow(workflow)
        raise RuntimeError("rolled back")


async def test_an_entry_handed_over_twice_stores_its_workflow_once(app: App) -> None:
    """A relay that crashed after the hand-over and before marking the entry published."""
    async with app.tm.transaction():
        entry_id = await app.outbox.append_workflow(chain(_job("a"), _job("b")))
    (entry,) = await app.outbox.claim(10, LEASE_MS)
    assert entry.type == WORKFLOW_ENTRY_TYPE
    publisher = JobOutboxPublisher(app.queue)
    await publisher.publish(entry)
    await publisher.publish(entry)
    await publisher.publish_many([entry])
    assert entry_id is not None
    info = await app.queue.get_workflow(outbox_workflow_id(entry_id))
    assert info is not None
    assert len(info.jobs) == 2
    assert sum((await app.jobs.counts()).values()) == 2


async def test_a_batch_of_plain_and_workflow_entries_is_handed_over(app: App) -> None:
    async with app.tm.transaction():
        await app.outbox.append("t", {"name": "plain"})
        entry_id = await app.outbox.append_workflow(chain(_job("a"), _job("b")))
        await app.outbox.append("t", {"name": "plain 2"})
    assert await app.relay.relay_once() == 3
    assert entry_id is not None
    assert await app.queue.get_workflow(outbox_workflow_id(entry_id)) is not None
    assert sum((await app.jobs.counts()).values()) == 4
    assert await app.harness.count(where="WHERE published_at IS NULL") == 0


async def test_a_workflow_that_cannot_be_stored_is_refused_before_any_write(app: App) -> None:
    keyed = Workflow()
    keyed.add(NewJob(type="t", payload={}, key="k"))
    not_json = Workflow()
    not_json.add(NewJob(type="t", payload={"when": object()}))
    async with app.tm.transaction():
        with pytest.raises(WorkflowError):
            await app.outbox.append_workflow(Workflow())
        with pytest.raises(WorkflowError):
            await app.outbox.append_workflow(keyed)
        with pytest.raises(PayloadError):
            await app.outbox.append_workflow(not_json)
    assert await app.harness.count() == 0


async def test_a_keyed_workflow_entry_is_appended_once(app: App) -> None:
    async with app.tm.transaction():
        first = await app.outbox.append_workflow(chain(_job("a")), key="order-1")
        second = await app.outbox.append_workflow(chain(_job("a")), key="order-1")
    assert first is not None
    assert second is None
    assert await app.harness.count() == 1
