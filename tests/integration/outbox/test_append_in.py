"""``append_in``: the outbox joins a session or connection the app opened itself, sync or async.

Each test runs on SQLite (the standard library's driver for sync sessions) and PostgreSQL
(psycopg 3 for sync sessions); the store is the same as ``append``'s, on its own async engine.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from pydantic import BaseModel
from sqlalchemy import Engine, insert, text
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import Session

from jobs import JobOptionError, PayloadError, PayloadValidationError, define_job
from jobs.telemetry import parse_traceparent
from orm_sqlalchemy import SQLAlchemyOutboxStore, create_engine, create_sync_engine
from tests.integration.outbox.conftest import OutboxHarness

LEASE_MS = 600_000


class Invoice(BaseModel):
    invoice_id: int
    email: str


SEND_INVOICE = define_job("invoice.send", Invoice)


class App:
    """The app's side: its own sync engine on the harness's database, and its orders table."""

    def __init__(self, harness: OutboxHarness) -> None:
        self.harness = harness
        self.engine: Engine = create_sync_engine(harness.url)
        self.store = harness.store()

    def order(self, session: Session, note: str) -> None:
        session.execute(insert(self.harness.orders).values(note=note))

    async def entries(self) -> list[tuple[Any, str | None]]:
        claimed = await self.store.claim(100, LEASE_MS)
        return sorted(((e.payload, e.key) for e in claimed), key=lambda e: json.dumps(e[0]))


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
async def app(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[App]:
    harness = OutboxHarness(request.param, tmp_path)
    made = App(harness)
    await harness.setup(made.store)
    yield made
    made.engine.dispose()
    await harness.cleanup()


async def in_thread(work: Callable[[], Any]) -> Any:
    """Run ``work`` in a thread with no event loop, as a Flask view or a script would."""
    return await asyncio.to_thread(work)


async def test_a_sync_session_commits_the_entry_with_the_apps_row(app: App) -> None:
    def place() -> str | None:
        with Session(app.engine) as session, session.begin():
            app.order(session, "book")
            return app.store.append_in(session, "order.placed", {"order": 1}, key="order:1")

    entry_id = await in_thread(place)
    assert entry_id is not None
    assert await app.harness.order_count() == 1
    claimed = await app.store.claim(10, LEASE_MS)
    assert [(e.id, e.type, e.payload, e.key) for e in claimed] == [
        (entry_id, "order.placed", {"order": 1}, "order:1")
    ]


async def test_a_rolled_back_session_leaves_nothing_and_wakes_nobody(app: App) -> None:
    await app.store.wait_for_entries(0)  # forget what set-up may have signalled

    def roll_back() -> None:
        with Session(app.engine) as session:
            app.order(session, "book")
            app.store.append_in(session, "order.placed", {"order": 1})
            session.rollback()
        with Session(app.engine) as session:  # closed without a commit: the same
            app.store.append_in(session, "order.placed", {"order": 2})

    waiting = asyncio.create_task(app.store.wait_for_entries(600))
    started = time.monotonic()
    await in_thread(roll_back)
    await waiting
    assert time.monotonic() - started >= 0.5, "a rollback woke the relay"
    assert await app.harness.order_count() == 0
    assert await app.entries() == []


async def test_a_duplicate_key_gives_none_and_one_entry(app: App) -> None:
    def twice() -> list[str | None]:
        ids = []
        with Session(app.engine) as session, session.begin():
            ids.append(app.store.append_in(session, "t", {"n": 1}, key="k"))
            ids.append(app.store.append_in(session, "t", {"n": 2}, key="k"))
        with Session(app.engine) as session, session.begin():
            ids.append(app.store.append_in(session, "t", {"n": 3}, key="k"))
        return ids

    first, second, third = await in_thread(twice)
    assert first is not None
    assert (second, third) == (None, None)
    assert await app.entries() == [({"n": 1}, "k")]


@pytest.mark.parametrize(
    ("call", "error"),
    [
        (lambda s, store: store.append_in(s, "t", {"at": {1, 2}}), PayloadError),
        (lambda s, store: store.append_in(s, SEND_INVOICE, {"invoice_id": "x"}), ValueError),
        (lambda s, store: store.append_in(s, "t", {}, delay_ms=-1), JobOptionError),
        (lambda s, store: store.append_in(s, "t", {}, delay_ms=True), JobOptionError),
        (lambda s, store: store.append_in(s, "t", {}, key=""), ValueError),
        (lambda s, store: store.append_in(s, "", {}), ValueError),
    ],
    ids=["not-json", "model", "negative-delay", "bool-delay", "empty-key", "empty-type"],
)
async def test_append_in_checks_as_append_does_and_writes_nothing(
    app: App, call: Callable[[Session, SQLAlchemyOutboxStore], Any], error: type[Exception]
) -> None:
    def bad() -> None:
        with Session(app.engine) as session, session.begin():
            app.order(session, "kept")
            with pytest.raises(error):
                call(session, app.store)

    await in_thread(bad)
    assert await app.harness.order_count() == 1  # the app's transaction went on
    assert await app.entries() == []


async def test_a_definition_validates_the_payload_into_its_model(app: App) -> None:
    def typed() -> None:
        with Session(app.engine) as session, session.begin():
            app.store.append_in(session, SEND_INVOICE, Invoice(invoice_id=7, email="a@b.c"))
            with pytest.raises(PayloadValidationError, match=r"invoice\.send"):
                app.store.append_in(session, SEND_INVOICE, {"invoice_id": 8})

    await in_thread(typed)
    assert await app.entries() == [({"invoice_id": 7, "email": "a@b.c"}, None)]


async def test_a_sync_connection_commits_and_rolls_back_with_its_transaction(app: App) -> None:
    def on_connections() -> None:
        with app.engine.begin() as conn:
            app.store.append_in(conn, "t", {"n": 1})
        with app.engine.connect() as conn:
            app.store.append_in(conn, "t", {"n": 2})
            conn.rollback()
            app.store.append_in(conn, "t", {"n": 3})
            conn.commit()

    await in_thread(on_connections)
    assert await app.entries() == [({"n": 1}, None), ({"n": 3}, None)]


async def test_the_entry_keeps_the_callers_trace_context(
    app: App, span_exporter: InMemorySpanExporter
) -> None:
    def traced() -> Any:
        with trace.get_tracer("test").start_as_current_span("POST /invoices") as span:
            with Session(app.engine) as session, session.begin():
                app.store.append_in(session, "t", {"n": 1})
            return span.get_span_context()

    context = await in_thread(traced)
    (entry,) = await app.store.claim(10, LEASE_MS)
    stored = parse_traceparent(entry.trace_context)
    assert stored is not None
    assert (stored.trace_id, stored.span_id) == (context.trace_id, context.span_id)


async def test_a_commit_in_a_thread_wakes_the_relay_waiting_on_the_stores_loop(app: App) -> None:
    await app.store.wait_for_entries(0)
    waiting = asyncio.create_task(app.store.wait_for_entries(30_000))
    await asyncio.sleep(0.1)  # the relay is waiting

    def commit() -> None:
        with Session(app.engine) as session, session.begin():
            app.store.append_in(session, "t", {"n": 1})

    started = time.monotonic()
    await in_thread(commit)
    await asyncio.wait_for(waiting, 10)
    assert time.monotonic() - started < 5
    assert len(await app.entries()) == 1


@pytest.mark.postgres
async def test_a_sync_commit_with_no_loop_notifies_a_relay_in_another_process(
    postgres_harness: OutboxHarness,
) -> None:
    """The app's store never ran on a loop (a Flask process): its NOTIFY comes from the sync
    notifier's thread, on the app's engine, and a relay's store elsewhere wakes on it."""
    harness = postgres_harness
    relay_store = harness.store()
    await harness.setup(relay_store)
    engine = create_sync_engine(harness.url)
    done = threading.Event()

    def flask_process() -> None:
        app_store = SQLAlchemyOutboxStore(
            harness.url, table_prefix=harness.prefix, metadata=harness.metadata
        )
        with Session(engine) as session, session.begin():
            app_store.append_in(session, "t", {"n": 1})
        done.set()
        asyncio.run(app_store.close())  # its NOTIFY sent before the engine goes

    try:
        await relay_store.wait_for_entries(0)
        waiting = asyncio.create_task(relay_store.wait_for_entries(60_000))
        await asyncio.sleep(0.2)  # listening
        started = time.monotonic()
        thread = threading.Thread(target=flask_process)
        thread.start()
        await asyncio.wait_for(waiting, 20)
        assert time.monotonic() - started < 10
        assert done.is_set()
        thread.join()
        assert len(await relay_store.claim(10, LEASE_MS)) == 1
    finally:
        engine.dispose()


async def test_an_async_session_and_connection_of_the_apps_own(app: App) -> None:
    engine = create_engine(app.harness.url)
    try:
        async with AsyncSession(engine) as session, session.begin():
            assert await app.store.append_in(session, "t", {"n": 1}) is not None
            assert await app.store.append_in(session, "t", {"n": 9}, key="k") is not None
        async with AsyncSession(engine) as session:
            await app.store.append_in(session, "t", {"n": 2})
            await session.rollback()
        async with engine.begin() as conn:
            assert await app.store.append_in(conn, "t", {"n": 3}, key="k") is None
            await app.store.append_in(conn, "t", {"n": 4})
    finally:
        await engine.dispose()
    assert await app.entries() == [({"n": 1}, None), ({"n": 4}, None), ({"n": 9}, "k")]


async def test_a_session_on_another_database_is_refused_before_anything_is_written(
    app: App, tmp_path: Path
) -> None:
    other = create_sync_engine(f"sqlite:///{tmp_path / 'other.db'}")

    def elsewhere() -> None:
        with Session(other) as session, session.begin():
            with pytest.raises(ValueError, match=r"append_in: the session is on .*other"):
                app.store.append_in(session, "t", {"n": 1})
            assert session.execute(text("SELECT 1")).scalar() == 1  # still usable

    try:
        await in_thread(elsewhere)
    finally:
        other.dispose()
    assert await app.entries() == []


def test_append_in_refuses_what_is_not_a_session(tmp_path: Path) -> None:
    store = SQLAlchemyOutboxStore(f"sqlite+aiosqlite:///{tmp_path / 'x.db'}")
    with pytest.raises(TypeError, match="append_in takes a SQLAlchemy Session"):
        store.append_in("session", "t", {})  # type: ignore[call-overload]
