"""The transaction manager: contextvar session, nesting, tasks, rollback, after-commit hooks."""

from __future__ import annotations

import asyncio

import pytest
from sqlalchemy.exc import InvalidRequestError

from orm_sqlalchemy.errors import NoTransactionError
from orm_sqlalchemy.transactions import (
    SQLAlchemyTransactionManager,
    TransactionRolledBackError,
    current_session,
    transactional,
)
from tests.integration.outbox.conftest import OutboxHarness


class Boom(Exception):
    pass


class OrderService:
    """Bare @transactional() finds self.transaction_manager."""

    def __init__(self, harness: OutboxHarness, tm: SQLAlchemyTransactionManager) -> None:
        self.transaction_manager = tm
        self.harness = harness
        self.outbox = harness.store(tm)

    @transactional()
    async def place(self, order_id: int, *, fail: bool = False) -> str:
        self.transaction_manager.session.add_all([])  # the session is reachable
        await self.transaction_manager.session.execute(
            self.harness.orders.insert().values(id=order_id, note="placed")
        )
        entry_id = await self.outbox.append("order.placed", {"id": order_id})
        if fail:
            raise Boom("payment declined")
        return entry_id

    @transactional()
    async def place_two(self, first: int, second: int, *, fail_second: bool = False) -> None:
        await self.place(first)
        await self.place(second, fail=fail_second)


async def _service(harness: OutboxHarness) -> OrderService:
    tm = SQLAlchemyTransactionManager(harness.engine())
    service = OrderService(harness, tm)
    await harness.setup(service.outbox)
    return service


async def test_commit_keeps_the_entry_and_rollback_drops_it(harness: OutboxHarness) -> None:
    service = await _service(harness)
    entry_id = await service.place(1)
    assert isinstance(entry_id, str)
    with pytest.raises(Boom):
        await service.place(2, fail=True)
    assert await harness.count() == 1
    assert await harness.order_count() == 1


async def test_nested_transactional_joins_the_outer_one(harness: OutboxHarness) -> None:
    service = await _service(harness)
    tm = service.transaction_manager
    async with tm.transaction() as outer:
        await service.place(1)
        async with tm.transaction() as inner:
            assert inner is outer
            assert current_session() is outer
        # Nothing is committed until the outermost block ends.
        assert await harness.count() == 0
    assert await harness.count() == 1

    with pytest.raises(Boom):
        await service.place_two(10, 11, fail_second=True)
    # The inner failure rolled back the whole outer transaction, the first order included.
    assert await harness.count() == 1
    assert await harness.order_count() == 1


async def test_a_caught_nested_failure_still_rolls_everything_back(
    harness: OutboxHarness,
) -> None:
    service = await _service(harness)
    tm = service.transaction_manager

    async def catches_the_nested_failure() -> None:
        async with tm.transaction():
            await service.place(1)
            with pytest.raises(Boom):
                await service.place(2, fail=True)
            with pytest.raises(NoTransactionError, match="rolled back"):
                _ = tm.session
            with pytest.raises(NoTransactionError):
                await service.place(3)  # must not open a fresh transaction and commit it

    with pytest.raises(TransactionRolledBackError):
        await catches_the_nested_failure()
    assert await harness.count() == 0
    assert await harness.order_count() == 0


async def test_concurrent_tasks_do_not_join_each_other(harness: OutboxHarness) -> None:
    service = await _service(harness)
    tm = service.transaction_manager
    a_appended, b_entered = asyncio.Event(), asyncio.Event()
    sessions = {}

    async def task_a() -> None:
        async with tm.transaction() as session:
            sessions["a"] = session
            await service.outbox.append("order.placed", {"by": "a"})
            a_appended.set()
            await b_entered.wait()
            raise Boom("a rolls back")

    async def task_b() -> None:
        await a_appended.wait()
        async with tm.transaction() as session:
            sessions["b"] = session
            assert tm.session is session
            b_entered.set()
            # On SQLite this waits (BEGIN IMMEDIATE) until A has rolled back; on PostgreSQL
            # both transactions are open at once.
            await service.outbox.append("order.placed", {"by": "b"})

    async with asyncio.timeout(30):
        results = await asyncio.gather(task_a(), task_b(), return_exceptions=True)
    assert isinstance(results[0], Boom)
    assert results[1] is None
    assert sessions["a"] is not sessions["b"]
    entries = await service.outbox.claim(10, 60_000)
    assert [e.payload for e in entries] == [{"by": "b"}]


async def test_outside_a_transaction_everything_raises(harness: OutboxHarness) -> None:
    service = await _service(harness)
    tm = service.transaction_manager
    with pytest.raises(NoTransactionError):
        _ = tm.session
    with pytest.raises(NoTransactionError):
        current_session()
    with pytest.raises(NoTransactionError):
        tm.after_commit(lambda: None)
    with pytest.raises(NoTransactionError):
        await service.outbox.append("order.placed", {"id": 1})
    assert not tm.in_transaction
    assert await harness.count() == 0


async def test_a_task_created_inside_joins_until_the_transaction_ends(
    harness: OutboxHarness,
) -> None:
    service = await _service(harness)
    tm = service.transaction_manager
    started, ended = asyncio.Event(), asyncio.Event()
    seen: dict[str, object] = {}

    async def child() -> None:
        seen["inside"] = tm.session
        started.set()
        await ended.wait()
        with pytest.raises(NoTransactionError):
            _ = tm.session
        with pytest.raises(NoTransactionError):
            await service.outbox.append("late", {})
        stale = seen["inside"]
        assert hasattr(stale, "execute")
        with pytest.raises(InvalidRequestError):
            await stale.execute(harness.orders.insert().values(id=99, note="late"))
        # A new transaction there is a fresh, independent one.
        async with tm.transaction() as fresh:
            assert fresh is not stale
            await service.outbox.append("fresh", {})

    async with tm.transaction() as session:
        joined = asyncio.create_task(child())
        async with asyncio.timeout(5):
            await started.wait()
        assert seen["inside"] is session
    ended.set()
    async with asyncio.timeout(30):
        await joined
    assert await harness.count() == 1
    assert await harness.order_count() == 0


async def test_after_commit_callbacks_run_after_the_outermost_commit_only(
    harness: OutboxHarness,
) -> None:
    service = await _service(harness)
    tm = service.transaction_manager
    calls: list[str] = []

    async def async_callback() -> None:
        calls.append(f"async saw {await harness.count()} entries")

    async with tm.transaction():
        await service.outbox.append("order.placed", {"id": 1})
        tm.after_commit(lambda: calls.append("sync"))
        async with tm.transaction():
            tm.after_commit(async_callback)
        assert calls == []  # the inner exit is not a commit
    assert calls == ["sync", "async saw 1 entries"]

    calls.clear()

    async def rolled_back() -> None:
        async with tm.transaction():
            tm.after_commit(lambda: calls.append("rolled back"))
            raise Boom

    with pytest.raises(Boom):
        await rolled_back()
    assert calls == []


async def test_a_failing_callback_does_not_undo_the_commit(harness: OutboxHarness) -> None:
    service = await _service(harness)
    tm = service.transaction_manager
    calls: list[str] = []

    def broken() -> None:
        raise RuntimeError("callback bug")

    async with tm.transaction():
        await service.outbox.append("order.placed", {"id": 1})
        tm.after_commit(broken)
        tm.after_commit(lambda: calls.append("second"))
    assert calls == ["second"]
    assert await harness.count() == 1


async def test_named_manager_and_decorator_errors(harness: OutboxHarness) -> None:
    service = await _service(harness)
    tm = service.transaction_manager

    @transactional(tm)
    async def add(order_id: int) -> int:
        await tm.session.execute(harness.orders.insert().values(id=order_id, note="x"))
        return order_id

    assert await add(5) == 5
    assert add.__name__ == "add"
    assert await harness.order_count() == 1

    class NoManager:
        @transactional()
        async def run(self) -> None: ...

    with pytest.raises(TypeError, match="transaction_manager"):
        await NoManager().run()
    with pytest.raises(TypeError, match="async def"):
        transactional(tm)(lambda: None)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"@transactional\(\)"):
        transactional(add)  # type: ignore[arg-type]


async def test_two_managers_nest_independently(harness: OutboxHarness) -> None:
    service = await _service(harness)
    other = SQLAlchemyTransactionManager(harness.engine())
    tm = service.transaction_manager
    async with tm.transaction() as first:
        async with other.transaction() as second:
            assert second is not first
            assert current_session() is second
            assert tm.session is first
        assert current_session() is first


async def test_a_cancelled_transaction_rolls_back(harness: OutboxHarness) -> None:
    service = await _service(harness)
    tm = service.transaction_manager
    appended = asyncio.Event()

    async def hangs() -> None:
        async with tm.transaction():
            await service.outbox.append("order.placed", {"id": 1})
            appended.set()
            await asyncio.Event().wait()

    task = asyncio.create_task(hangs())
    async with asyncio.timeout(5):
        await appended.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await service.place(2)  # the lock (SQLite) and the connection were released
    assert [e.payload for e in await service.outbox.claim(10, 60_000)] == [{"id": 2}]


async def test_entries_appended_first_or_alone_live_or_die_with_the_transaction(
    harness: OutboxHarness,
) -> None:
    """The append runs on the session's driver connection once the transaction is open there;
    as the transaction's first statement (or its only ones) it must open it all the same."""
    service = await _service(harness)
    tm = service.transaction_manager
    outbox = service.outbox

    async def only_entries_then_fail() -> None:
        async with tm.transaction():
            await outbox.append("order.placed", {"n": 1})
            await outbox.append("order.placed", {"n": 2})
            raise Boom("rolled back")

    with pytest.raises(Boom):
        await only_entries_then_fail()
    assert await harness.count() == 0
    async with tm.transaction() as session:
        await outbox.append("order.placed", {"n": 3})
        await session.execute(harness.orders.insert().values(id=3, note="after the entry"))
        await outbox.append("order.placed", {"n": 4})
    assert await harness.count() == 2
    assert await harness.order_count() == 1
    entries = await outbox.claim(10, 60_000)
    assert sorted(entry.payload["n"] for entry in entries) == [3, 4]
