"""Group commit: a SQL store's statements on SQLite, run together in its process's write turns.

``SQLiteBackend`` is the SQLite ``Backend`` of both SQL stores (``connections`` has the
PostgreSQL one and the protocol); see the package's docstring for where it stands in how a
write on SQLite is scheduled.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
from collections.abc import AsyncIterator, Callable, Generator
from dataclasses import dataclass
from typing import Any

from sqlalchemy.ext.asyncio import AsyncEngine

from jobs.errors import DriverError
from jobs.spi.support import Coalescer

from ..connections import Row, open_detached
from ..errors import store_error
from ..statements import Statement
from .turns import WriterTurns, waits_for_itself, writer_gate

__all__ = ["SQLiteBackend", "Script"]


@dataclass(frozen=True, slots=True)
class Script:
    """Statements run in one transaction, each chosen from the rows of those before it (a
    workflow job's settle: SQLite has no data-modifying CTEs). ``steps()`` yields
    ``(statement, params)`` and is sent each one's rows; what it returns is the result."""

    name: str
    steps: Callable[[], Generator[tuple[Statement, dict[str, Any]], list[Row], list[Row]]]


_Statement = tuple[Statement | Script, dict[str, Any]]


async def _execute(
    connection: Any, statement: Statement | Script, params: dict[str, Any]
) -> list[Row]:
    """Run a statement, or a script's statements one after another, on ``connection``."""
    if isinstance(statement, Statement):
        return list(await connection.execute_fetchall(statement.text, params))
    steps = statement.steps()
    try:
        step, step_params = next(steps)
        while True:
            rows = list(await connection.execute_fetchall(step.text, step_params))
            step, step_params = steps.send(rows)
    except StopIteration as done:
        result: list[Row] = done.value
        return result


class SQLiteBackend:
    """One aiosqlite connection, with group commit.

    SQLite has one writer at a time, so more connections would only queue on its lock. With
    ``synchronous=FULL`` every commit waits for an fsync, which would cap the store at about
    one operation per fsync; so statements that arrive while others run are executed together
    in one ``BEGIN IMMEDIATE`` ... ``COMMIT`` (``jobs.coalescing``), and each caller gets its
    result once that commit is durable. A lone statement runs on its own (autocommit). Each
    statement keeps its own effect: if one in a group fails, the group is rolled back and its
    statements are run again one by one, so that only the failing one reports the error.
    Each group is formed once it has the engine's writer turn (``turns.SQLiteWriterGate``,
    as a store's group), queueing with the app's transactions in this process rather than in
    SQLite's busy handler; what comes in while it waits joins it. A statement the Coalescer
    would send alone (nothing in flight, calls not overlapping) that finds the turn free, in
    this process and between processes, takes it at once and runs from its caller's task
    (``_alone``): the same turn, without a task to wait in.
    """

    def __init__(self, engine: AsyncEngine, *, name: str) -> None:
        self._engine = engine
        self._name = name
        self._gate = writer_gate(engine)
        self._connection: Any = None
        self._lock = asyncio.Lock()
        self._releasing: set[asyncio.Task[None]] = set()
        self._groups: Coalescer[_Statement, list[Row]] = Coalescer(
            self._run_group,
            name=f"{name} commits",
            hold=None if self._gate is None else self._writer_turn,
        )

    async def fetch(self, statement: Statement | Script, params: dict[str, Any]) -> list[Row]:
        if self._connection is None:
            await self._connect()
        groups, gate = self._groups, self._gate
        if gate is not None and waits_for_itself(gate):
            raise DriverError(
                f"{self._name}: this task's open transaction on the same SQLite database holds "
                "its write lock, so the store's statement would wait for it until the busy "
                "timeout; write the job in that transaction through the outbox "
                "(outbox.append / outbox.append_in(session, ...)), or after it commits"
            )
        if gate is not None and isinstance(statement, Statement) and groups.go_alone():
            turns = gate.try_acquire()
            if turns is not None:
                try:
                    return await self._alone(turns, statement, params)
                finally:
                    groups.alone_done()
            groups.alone_done()
        return await groups.submit((statement, params))

    async def fetch_unsorted(self, statement: Statement, params: dict[str, Any]) -> list[Row]:
        """``fetch``: SQLite's planner reads the index in order for these statements with or
        without ``ANALYZE`` statistics."""
        return await self.fetch(statement, params)

    async def close(self) -> None:
        await self._groups.close()
        await asyncio.gather(*self._releasing, return_exceptions=True)
        connection, self._connection = self._connection, None
        if connection is not None:
            await connection.close()

    @contextlib.asynccontextmanager
    async def _writer_turn(self) -> AsyncIterator[None]:
        assert self._gate is not None
        try:
            turns = await self._gate.acquire(store=True)
        except Exception as exc:  # "database is locked", as SQLite's own would read
            raise store_error(exc, self._name) from exc
        try:
            yield
        finally:
            turns.release()

    async def _alone(
        self, turns: WriterTurns, statement: Statement, params: dict[str, Any]
    ) -> list[Row]:
        """A lone statement that found the writer turn free (``try_acquire``): run from the
        caller's task in that turn, a group of one with no task or future of its own (one
        enqueue at a time: two loop iterations fewer per statement).

        A caller cancelled while its statement runs leaves the statement running in
        aiosqlite's thread: the turn (and the lock file) is let go only once it has ended."""
        connection = self._connection
        try:
            rows = await connection.execute_fetchall(statement.text, params)
        except asyncio.CancelledError:
            self._release_after(connection, turns)
            raise
        except Exception as exc:
            turns.release()
            raise store_error(exc, self._name) from exc
        except BaseException:
            turns.release()
            raise
        turns.release()
        return list(rows)

    def _release_after(self, connection: Any, turns: WriterTurns) -> None:
        task = asyncio.get_running_loop().create_task(self._release_when_idle(connection, turns))
        self._releasing.add(task)
        task.add_done_callback(self._releasing.discard)

    @staticmethod
    async def _release_when_idle(connection: Any, turns: WriterTurns) -> None:
        """Release ``turns`` once aiosqlite's thread has run what it was given before: it runs
        one thing at a time, in order, so a no-op queued now ends after them."""
        try:
            with contextlib.suppress(Exception):
                await connection.execute_fetchall("SELECT 1")
        finally:
            turns.release()

    async def _run_group(self, group: list[_Statement]) -> list[list[Row] | Exception]:
        if len(group) > 1:
            together = await self._run_together(group)
            if together is not None:
                return together
        return [await self._run_alone(statement, params) for statement, params in group]

    async def _run_together(self, group: list[_Statement]) -> list[list[Row] | Exception] | None:
        """The group's results from one transaction; None if a statement failed (rolled back)."""
        connection = self._connection
        try:
            await connection.execute_fetchall("BEGIN IMMEDIATE")
        except Exception as exc:  # nothing ran: every caller gets the error (busy, lost...)
            return [store_error(exc, self._name) for _ in group]
        try:
            results: list[list[Row] | Exception] = [
                await _execute(connection, statement, params) for statement, params in group
            ]
            await connection.commit()
        except Exception:
            with contextlib.suppress(Exception):
                if connection.in_transaction:
                    await connection.rollback()
            return None
        return results

    async def _run_alone(
        self, statement: Statement | Script, params: dict[str, Any]
    ) -> list[Row] | Exception:
        connection = self._connection
        try:
            if isinstance(statement, Statement):
                return list(await connection.execute_fetchall(statement.text, params))
            await connection.execute_fetchall("BEGIN IMMEDIATE")  # a script: all or nothing
            try:
                rows = await _execute(connection, statement, params)
                await connection.commit()
            except BaseException:
                with contextlib.suppress(Exception):
                    if connection.in_transaction:
                        await connection.rollback()
                raise
            return rows
        except Exception as exc:
            return store_error(exc, self._name)

    async def _connect(self) -> None:
        async with self._lock:
            if self._connection is not None:
                return
            try:
                connection = await open_detached(self._engine)
            except Exception as exc:
                raise store_error(exc, self._name) from exc
            if connection.isolation_level is not None:
                await connection.close()
                raise DriverError(
                    f"{self._name} needs a SQLite engine set up by "
                    "orm_sqlalchemy.engine.configure_sqlite (autocommit driver connections)"
                )
            connection.row_factory = sqlite3.Row
            self._connection = connection
