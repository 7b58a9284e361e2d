"""examples/fastapi, tested as an application would be: on jobs.testing.

The endpoint is called through httpx with the app's lifespan running (the context booted by it,
on a testing builder: the in-process driver on the test's ManualClock, the real outbox on a
SQLite file); the handler's effect is checked after ``run_jobs``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy import func, select

from examples.fastapi.app import create_app
from examples.fastapi.model import SEND_RECEIPT, Order
from examples.fastapi.wiring import shop_configuration
from framework import ApplicationContext
from jobs import ManualClock
from jobs.testing import assert_enqueued, builder_for_tests, enqueued, run_jobs
from orm_sqlalchemy import SQLAlchemyTransactionManager


@pytest.fixture
async def app(tmp_path: Path, jobs_clock: ManualClock) -> AsyncIterator[FastAPI]:
    shop = shop_configuration(f"sqlite+aiosqlite:///{tmp_path / 'shop.db'}")
    application = create_app(builder_for_tests([shop], clock=jobs_clock))
    async with application.router.lifespan_context(application):
        yield application


@pytest.fixture
async def client(app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://shop") as http:
        yield http


def context_of(app: FastAPI) -> ApplicationContext:
    context: ApplicationContext = app.state.context
    return context


async def order_count(context: ApplicationContext) -> int:
    tm: SQLAlchemyTransactionManager = context.get_value("transaction_manager")
    async with tm.transaction() as session:
        return int((await session.scalar(select(func.count()).select_from(Order))) or 0)


async def test_an_order_commits_with_its_receipt_job_which_the_worker_sends(
    app: FastAPI, client: httpx.AsyncClient
) -> None:
    context = context_of(app)
    placed = await client.post("/orders", json={"email": "ada@example.com", "total_cents": 1250})
    assert placed.status_code == 201
    order_id = placed.json()["id"]
    assert (await client.get(f"/orders/{order_id}")).json()["receipt_sent"] is False
    assert await enqueued(context) == []  # in the outbox, not yet relayed

    [run] = await run_jobs(context)  # relays the outbox entry, then runs the job

    assert run.type == SEND_RECEIPT.type
    assert run.ok
    assert run.key == f"receipt:{order_id}"
    assert run.payload == {"order_id": order_id, "email": "ada@example.com", "total_cents": 1250}
    order = (await client.get(f"/orders/{order_id}")).json()
    assert order == {
        "id": order_id,
        "email": "ada@example.com",
        "total_cents": 1250,
        "receipt_sent": True,
    }
    assert await run_jobs(context) == []


async def test_a_receipt_that_does_not_fit_its_model_rolls_the_order_back(
    app: FastAPI, client: httpx.AsyncClient
) -> None:
    context = context_of(app)
    refused = await client.post("/orders", json={"email": "not an address", "total_cents": 5})
    assert refused.status_code == 422
    assert "does not fit Receipt" in refused.json()["detail"]
    assert "email" in refused.json()["detail"]
    assert await order_count(context) == 0
    assert await run_jobs(context) == []


async def test_orders_placed_before_the_relay_ran_wait_as_typed_jobs(
    app: FastAPI, client: httpx.AsyncClient
) -> None:
    context = context_of(app)
    for cents in (100, 200):
        assert (
            await client.post("/orders", json={"email": "bob@example.com", "total_cents": cents})
        ).status_code == 201
    relay = context.get_value("outbox_relay")
    assert await relay.relay_once() == 2  # what a worker's relay does, here by hand
    waiting = await assert_enqueued(context, SEND_RECEIPT, count=2)
    assert sorted(job.payload.total_cents for job in waiting) == [100, 200]  # Receipt models
    runs = await run_jobs(context)
    assert [run.ok for run in runs] == [True, True]
    assert await order_count(context) == 2
