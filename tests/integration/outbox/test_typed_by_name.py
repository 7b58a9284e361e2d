"""Typed by name (issue 33, item 5): a job given by its type name, not through its definition,
is validated against the definition its handler registered, before anything is written: in the
async queue, the SyncJobQueue, ``outbox.append`` and ``outbox.append_in``. A type with no
definition registered (no handler here: a producer-only app; or a handler of a plain payload)
is checked as JSON only."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel
from sqlalchemy.orm import Session

from framework import ApplicationBuilder, ApplicationContext, configuration, entry
from jobs import (
    JOB_QUEUE,
    OUTBOX_STORE,
    InProcessJobDriver,
    JobHandlerRegistry,
    JobQueue,
    JobsAutoConfiguration,
    JobsSettings,
    NewJob,
    PayloadValidationError,
    SyncJobQueue,
    define_job,
    job_handler,
)
from orm_sqlalchemy import SQLAlchemyOutboxStore, SQLAlchemyTransactionManager, create_sync_engine
from tests.integration.outbox.conftest import OutboxHarness

LEASE_MS = 600_000


class Receipt(BaseModel):
    invoice_id: int


SEND_RECEIPT = define_job("receipt.send", Receipt)
BAD = {"invoice_id": "seven"}
MESSAGE = r"job 'receipt\.send' does not fit Receipt: payload\[\"invoice_id\"\]"


async def send_receipt(payload: Receipt) -> None: ...


async def plain(payload: Any) -> None: ...


def registry() -> JobHandlerRegistry:
    made = JobHandlerRegistry()
    made.register(SEND_RECEIPT, send_receipt)
    made.register("audit.plain", plain)
    return made


@pytest.fixture
async def db(tmp_path: Path) -> AsyncIterator[OutboxHarness]:
    harness = OutboxHarness("sqlite", tmp_path)
    yield harness
    await harness.cleanup()


def test_the_registry_knows_the_definition_of_a_handled_type() -> None:
    made = registry()
    assert made.definition_of("receipt.send") is SEND_RECEIPT
    assert made.definition_of("audit.plain") is None  # a plain payload: no model
    assert made.definition_of("nobody.handles") is None


async def test_the_queue_validates_a_type_name_against_the_registered_definition() -> None:
    driver = InProcessJobDriver()
    queue = JobQueue(driver, registry=registry())
    with pytest.raises(PayloadValidationError, match=MESSAGE):
        await queue.enqueue("receipt.send", BAD)
    assert (await driver.list_jobs(state=None, job_type=None, limit=10, cursor=None)).jobs == []
    job_id = await queue.enqueue("receipt.send", {"invoice_id": "7"})
    assert job_id is not None
    info = await driver.get_job(job_id)
    assert info is not None
    assert info.payload == {"invoice_id": 7}  # the model's JSON, as through the definition
    # No model to check: a plain handler's type, an unknown type, a queue without a registry.
    assert await queue.enqueue("audit.plain", BAD) is not None
    assert await queue.enqueue("nobody.handles", BAD) is not None
    assert await JobQueue(driver).enqueue("receipt.send", BAD) is not None


async def test_a_batch_by_name_is_validated_and_nothing_is_stored() -> None:
    driver = InProcessJobDriver()
    queue = JobQueue(driver, registry=registry())
    good = NewJob(type="receipt.send", payload={"invoice_id": 1})
    with pytest.raises(PayloadValidationError, match=MESSAGE) as caught:
        await queue.enqueue_many([good, NewJob(type="receipt.send", payload=BAD)])
    assert "in job 1 of the batch" in "".join(caught.value.__notes__)
    assert (await driver.list_jobs(state=None, job_type=None, limit=10, cursor=None)).jobs == []


def test_the_sync_queue_validates_by_name_too() -> None:
    with SyncJobQueue(InProcessJobDriver(), registry=registry()) as queue:
        with pytest.raises(PayloadValidationError, match=MESSAGE):
            queue.enqueue("receipt.send", BAD)
        assert queue.enqueue("receipt.send", {"invoice_id": 3}) is not None


async def test_the_apps_queue_bean_validates_by_name() -> None:
    class Handlers:
        @job_handler(SEND_RECEIPT)
        async def handle(self, payload: Receipt) -> None: ...

    @configuration
    class App:
        @entry()
        def handlers(self) -> Handlers:
            return Handlers()

    context = await ApplicationBuilder([JobsAutoConfiguration, App]).run()
    try:
        with pytest.raises(PayloadValidationError, match=MESSAGE):
            await context.get_value(JOB_QUEUE).enqueue("receipt.send", BAD)
    finally:
        await context.close()


async def test_append_validates_by_name_before_any_write(db: OutboxHarness) -> None:
    tm = SQLAlchemyTransactionManager(db.engine())
    store = db.store(tm)
    store.use_definitions(registry())
    await db.setup(store)

    async def place_order() -> None:
        async with tm.transaction() as session:
            await session.execute(db.orders.insert().values(note="order"))
            await store.append("receipt.send", BAD)

    with pytest.raises(PayloadValidationError, match=MESSAGE):
        await place_order()
    assert (await db.order_count(), await db.count()) == (0, 0)
    async with tm.transaction():
        await store.append("receipt.send", {"invoice_id": "8"})
        await store.append("nobody.handles", BAD)  # a producer that knows no handler
    payloads = {entry.type: entry.payload for entry in await store.claim(10, LEASE_MS)}
    assert payloads == {"receipt.send": {"invoice_id": 8}, "nobody.handles": BAD}


async def test_append_in_validates_by_name_before_any_write(db: OutboxHarness) -> None:
    store = db.store()
    store.use_definitions(registry())
    await db.setup(store)
    engine = create_sync_engine(db.url)

    def app_transaction() -> None:
        with Session(engine) as session, session.begin():
            with pytest.raises(PayloadValidationError, match=MESSAGE):
                store.append_in(session, "receipt.send", BAD)
            store.append_in(session, "receipt.send", {"invoice_id": 9})

    try:
        await asyncio.to_thread(app_transaction)
    finally:
        engine.dispose()
    [entry_] = await store.claim(10, LEASE_MS)
    assert entry_.payload == {"invoice_id": 9}


async def test_the_registry_hands_itself_to_the_outbox_store_bean(db: OutboxHarness) -> None:
    """In an application context nothing is wired by hand: the registry, when it starts,
    gives itself to the OUTBOX_STORE bean (any bean with ``use_definitions``)."""
    store = db.store()
    await db.setup(store)

    class Handlers:
        @job_handler(SEND_RECEIPT)
        async def handle(self, payload: Receipt) -> None: ...

    @configuration
    class App:
        @entry()
        def handlers(self) -> Handlers:
            return Handlers()

        @entry(OUTBOX_STORE)
        def outbox_store(self) -> SQLAlchemyOutboxStore:
            return store

        @entry()
        def jobs_settings(self) -> JobsSettings:
            return JobsSettings(allow_volatile_outbox=True, auto_start=False)

    context: ApplicationContext = await ApplicationBuilder([JobsAutoConfiguration, App]).run()
    try:
        with pytest.raises(PayloadValidationError, match=MESSAGE):
            await append_bad(store)
        assert await db.count() == 0
    finally:
        await context.close()


async def append_bad(store: SQLAlchemyOutboxStore) -> None:
    async with store.transaction_manager.transaction():
        await store.append("receipt.send", BAD)
