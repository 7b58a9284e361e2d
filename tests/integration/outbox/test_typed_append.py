"""Typed outbox entries: a job definition validates before any write; a present key is dropped."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from jobs import InProcessJobDriver, JobOutboxPublisher, JobQueue, define_job
from jobs.errors import PayloadValidationError
from orm_sqlalchemy import SQLAlchemyOutboxStore, SQLAlchemyTransactionManager
from tests.integration.outbox.conftest import OutboxHarness

LEASE_MS = 600_000


class Receipt(BaseModel):
    invoice_id: int
    email: str


SEND_RECEIPT = define_job("receipt.send", Receipt)


async def _store(
    harness: OutboxHarness,
) -> tuple[SQLAlchemyTransactionManager, SQLAlchemyOutboxStore]:
    tm = SQLAlchemyTransactionManager(harness.engine())
    store = harness.store(tm)
    await harness.setup(store)
    return tm, store


async def test_a_definition_stores_the_validated_model_as_json(harness: OutboxHarness) -> None:
    tm, store = await _store(harness)
    async with tm.transaction():
        first = await store.append(SEND_RECEIPT, Receipt(invoice_id=7, email="a@b.c"))
        second = await store.append(SEND_RECEIPT, {"invoice_id": "8", "email": "d@e.f"})
    assert first is not None
    assert second is not None
    entries = {entry.id: entry for entry in await store.claim(10, LEASE_MS)}
    assert entries[first].type == "receipt.send"
    assert entries[first].payload == {"invoice_id": 7, "email": "a@b.c"}
    assert entries[second].payload == {"invoice_id": 8, "email": "d@e.f"}  # coerced by the model


async def test_a_payload_that_does_not_fit_fails_the_transaction_before_any_write(
    harness: OutboxHarness,
) -> None:
    tm, store = await _store(harness)

    async def place_order() -> None:
        async with tm.transaction() as session:
            await session.execute(harness.orders.insert().values(note="bad receipt"))
            await store.append(SEND_RECEIPT, {"invoice_id": "seven"})

    with pytest.raises(PayloadValidationError, match=r"receipt\.send.*Receipt.*invoice_id"):
        await place_order()
    assert await harness.order_count() == 0
    assert await harness.count() == 0


async def test_a_key_already_in_the_outbox_is_dropped_and_carries_into_the_job(
    harness: OutboxHarness,
) -> None:
    tm, store = await _store(harness)
    async with tm.transaction():
        entry_id = await store.append(SEND_RECEIPT, {"invoice_id": 7, "email": "a"}, key="r:7")
        assert await store.append(SEND_RECEIPT, {"invoice_id": 7, "email": "b"}, key="r:7") is None
    async with tm.transaction():  # committed earlier: still present
        assert await store.append("receipt.send", {"invoice_id": 7}, key="r:7") is None
        assert await store.append("receipt.send", {"invoice_id": 8}, key="r:8") is not None
    assert await harness.count(where="WHERE key = 'r:7'") == 1
    entries = {entry.key: entry for entry in await store.claim(10, LEASE_MS)}
    assert entries["r:7"].id == entry_id
    assert entries["r:7"].payload == {"invoice_id": 7, "email": "a"}

    driver = InProcessJobDriver()
    await JobOutboxPublisher(JobQueue(driver)).publish(entries["r:7"])
    [job] = await driver.claim(10, LEASE_MS, ["receipt.send"])
    assert job.key == "r:7"


async def test_entries_without_a_key_never_conflict(harness: OutboxHarness) -> None:
    tm, store = await _store(harness)
    async with tm.transaction():
        ids = [await store.append("order.placed", {"n": n}) for n in range(3)]
    assert None not in ids
    assert await harness.count() == 3
