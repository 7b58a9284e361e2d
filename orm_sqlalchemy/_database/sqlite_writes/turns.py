"""SQLite's write lock handed to the writers of a process in turn, and between processes.

Writers of one process queue in the process, not in SQLite's busy handler: a configured engine
has a ``SQLiteWriterGate`` (``writer_gate(engine)``), SQLite's write lock handed over in turn
in the process: the transaction manager's transactions take it at their BEGIN and give it back
at COMMIT/ROLLBACK, the stores' own statement groups around theirs. SQLite's busy handler
sleeps with growing pauses (1, 2, 5 ... 100 ms) and retries, so under load a waiting writer
sleeps past the moment the lock is free and the order is left to chance: measured, 10
producers committing an outbox entry each, the relay's and runner's statements waited seconds
(commit-to-handler p99 1.1-3.3 s). Handed over, the lock goes to the next writer in the next
loop iteration. The pool keeps its connections, so readers (WAL) are not held up.

Between processes (the app and a ``neverlost worker`` beside it on one file) the turn's holder
also takes an advisory lock on ``<database>-neverlost-writer.lock`` for its turn
(``process_lock``): the kernel wakes the waiting process when the holder lets go, or dies.
Measured, 10 producers with the relay and runner in a worker process, runs interleaved:
commit-to-handler p50 85-1,330 ms and p99 0.4-2.5 s through SQLite's busy handler, p50 35-39
ms and p99 65-91 ms queued on the lock file, at the same commit rate (the p50 is mostly the
worker's 50 ms ``data_version`` watch). Relay and runner in the producers' process (two
``flock`` calls a turn, never a wait), 12 interleaved pairs: median commit rate 467 against
454/s, within the noise. A transaction opened another way (``engine.begin()`` yourself,
another tool on the file, any writer on Windows) still meets the lock in the busy handler; an
in-memory database has no lock file.

The gate is made and attached to an engine by ``engine.configure_sqlite`` (``begin``); this
module is how a process's writers take turns (``SQLiteWriterGate``, ``WriterTurns``, the
transaction's ``TurnSlot``). The stores group their statements into turns
(``group_commit.SQLiteBackend``); ``commits`` watches commits by other connections.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import sqlite3
import time
import weakref
from collections.abc import AsyncIterator
from contextvars import ContextVar, Token
from typing import Protocol

from loguru import logger
from sqlalchemy.ext.asyncio import AsyncEngine

from .process_lock import ProcessWriterLock

__all__ = [
    "GATE_ATTRIBUTE",
    "STORE_TURN_AFTER",
    "SQLiteWriterGate",
    "TurnSlot",
    "TurnWatcher",
    "WriterTurns",
    "close_turn_slot",
    "open_turn_slot",
    "turn_slot",
    "waits_for_itself",
    "writer_gate",
]

GATE_ATTRIBUTE = "_neverlost_sqlite_writer_gate"
"""The attribute of a configured sync engine that holds its gate (``writer_gate``)."""


class TurnSlot:
    """The write turn of one transaction, taken at its BEGIN (``take``), and who holds it: the
    gate and the task that began the transaction (``holds_lock_of``)."""

    __slots__ = ("gate", "task", "turns")

    def __init__(self) -> None:
        self.turns: WriterTurns | None = None
        self.gate: SQLiteWriterGate | None = None
        self.task: asyncio.Task[object] | None = None

    async def take(self, gate: SQLiteWriterGate) -> None:
        self.turns = await gate.acquire()
        self.gate, self.task = gate, asyncio.current_task()

    def release(self) -> None:
        turns, self.turns = self.turns, None
        self.gate = self.task = None
        if turns is not None:
            turns.release()


def waits_for_itself(gate: SQLiteWriterGate) -> bool:
    """Whether this task holds SQLite's write lock of ``gate``'s database through a transaction
    it opened (a manager's, an inbox's): a store statement of this task on that database would
    wait for its own transaction, until the busy timeout, since the task cannot end it while it
    waits. Another task sharing the context (one made inside the transaction) is not held up
    for good, and is not refused."""
    slot = turn_slot.get()
    if slot is None or slot.turns is None or slot.task is not asyncio.current_task():
        return False
    held = slot.gate
    return held is gate or (
        held is not None and held.lock_path is not None and held.lock_path == gate.lock_path
    )


turn_slot: ContextVar[TurnSlot | None] = ContextVar("neverlost_sqlite_turn", default=None)


def open_turn_slot() -> tuple[TurnSlot, Token[TurnSlot | None]]:
    """Have the next BEGIN on a configured SQLite engine in this context wait for the writer
    gate and keep the turn in the slot, until ``slot.release()`` (after COMMIT/ROLLBACK).
    Reset the token with ``close_turn_slot`` in the same context."""
    slot = TurnSlot()
    return slot, turn_slot.set(slot)


def close_turn_slot(token: Token[TurnSlot | None]) -> None:
    turn_slot.reset(token)


def writer_gate(engine: AsyncEngine) -> SQLiteWriterGate | None:
    """The writer gate of a SQLite engine set up by ``configure_sqlite``; None otherwise."""
    gate: SQLiteWriterGate | None = getattr(engine.sync_engine, GATE_ATTRIBUTE, None)
    return gate


class TurnWatcher(Protocol):
    """Told when this engine's write turns begin and end (``SQLiteWriterGate.watch``): every
    commit through the engine's gated transactions falls between the two."""

    def turn_began(self) -> None: ...

    def turn_ending(self) -> None: ...


STORE_TURN_AFTER = 1
"""A waiting store group is handed the write turn after at most this many app transactions."""


class SQLiteWriterGate:
    """SQLite's one write lock, handed to this process's writers in turn.

    ``async with gate.turn():`` around ``BEGIN IMMEDIATE`` ... ``COMMIT``. A turn that ends is
    handed straight to the next waiter, no newcomer barging in (as one does with the
    ``asyncio.Queue`` of SQLAlchemy's ``AsyncAdaptedQueuePool``, whose single connection would
    also hold up readers). Two queues: app transactions in arrival order, and the stores' own
    statement groups (``store=True``: the relay's claims and marks, the job store's enqueues,
    claims and settles; each group one turn for all the callers that came in while it waited).
    While both wait they alternate (``STORE_TURN_AFTER``). Measured with 10 producers, relay and
    runner in one process (SQLite, jobs on the same file; turns counted, so the turn counts are
    exact, the rates noisy): the stores' groups in arrival order took 0.75 turns per producer
    transaction but waited behind every producer (commit-to-handler p99 430 ms); first always,
    they took 3.2 turns per producer transaction of 1.5 statements each (p99 42 ms, but half
    the commit rate); alternating, p99 80-190 ms at 0.8-1.2x the commit rate of arrival order.
    Through SQLite's busy handler it was p99 1.1-3.3 s. Waiting longer than the busy timeout
    raises what SQLite would have: ``sqlite3.OperationalError("database is locked ...")``.
    With a ``lock_path`` (a database file, see ``configure_sqlite``) a turn also holds the lock
    between processes for its length (``ProcessWriterLock``), the busy timeout counting both
    waits. State is kept per event loop (an engine may outlive one: tests, ``asyncio.run`` twice).
    """

    def __init__(self, timeout_s: float, *, lock_path: str | None = None) -> None:
        self._timeout_s = timeout_s
        self.lock_path = lock_path
        self._turns: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, WriterTurns] = (
            weakref.WeakKeyDictionary()
        )
        self._watchers: list[TurnWatcher] = []

    def watch(self, watcher: TurnWatcher) -> None:
        """Tell ``watcher`` of each turn, once it is held (between processes too) and before it
        is let go, until ``unwatch``."""
        self._watchers.append(watcher)

    def unwatch(self, watcher: TurnWatcher) -> None:
        with contextlib.suppress(ValueError):
            self._watchers.remove(watcher)

    @contextlib.asynccontextmanager
    async def turn(self, *, store: bool = False) -> AsyncIterator[None]:
        """Hold the write turn for the block (see the class)."""
        turns = await self.acquire(store=store)
        try:
            yield
        finally:
            turns.release()

    def waiting(self) -> tuple[int, int]:
        """How many wait for the turn on this event loop: (stores' groups, app transactions)."""
        turns = self._turns.get(asyncio.get_running_loop())
        return (0, 0) if turns is None else turns.waiting()

    def waits_for_another_process(self) -> bool:
        """Whether this event loop's holder of the turn waits for a writer of another process."""
        turns = self._turns.get(asyncio.get_running_loop())
        return turns is not None and turns.waits_for_another_process()

    def close(self) -> None:
        """Close the lock file of each event loop whose turn nobody holds (the engine's
        ``dispose()``; a later writer opens it again), so an engine disposed of holds no
        descriptor while it waits for the garbage collector."""
        for turns in list(self._turns.values()):
            turns.close()

    async def acquire(self, *, store: bool = False) -> WriterTurns:
        """Wait for the write turn; the object to ``release()`` when the transaction ends."""
        turns = self._loop_turns()
        await turns.acquire(store=store, timeout_s=self._timeout_s)
        return turns

    def try_acquire(self) -> WriterTurns | None:
        """The write turn if it is free at once, in this process and (``lock_path``) between
        processes, as ``acquire`` would have it; else None, and nothing held (wait with
        ``acquire``). A lone store statement takes it so, with no task to wait in."""
        turns = self._loop_turns()
        return turns if turns.try_acquire() else None

    def _loop_turns(self) -> WriterTurns:
        loop = asyncio.get_running_loop()
        turns = self._turns.get(loop)
        if turns is None:
            process = None if self.lock_path is None else ProcessWriterLock(self.lock_path)
            turns = self._turns[loop] = WriterTurns(process, self._watchers)
        return turns


class WriterTurns:
    """The write turn on one event loop: held or not, and who waits for it (two queues); and
    the lock between processes (``ProcessWriterLock``) that its holder takes next."""

    def __init__(
        self, process: ProcessWriterLock | None, watchers: list[TurnWatcher] | None = None
    ) -> None:
        self._process = process
        self._watchers = [] if watchers is None else watchers
        self._held = False
        self._passed = 0
        self._stores: collections.deque[asyncio.Future[None]] = collections.deque()
        self._others: collections.deque[asyncio.Future[None]] = collections.deque()

    async def acquire(self, *, store: bool, timeout_s: float) -> None:
        await self._acquire(store=store, timeout_s=timeout_s)
        self._began()

    async def _acquire(self, *, store: bool, timeout_s: float) -> None:
        left_s = timeout_s
        if self._held:
            started = time.monotonic()
            await self._wait(store=store, timeout_s=timeout_s)
            left_s -= time.monotonic() - started
        else:
            self._held = True
        process = self._process
        if process is None:
            return
        try:
            if process.try_acquire():
                return
            await process.acquire(max(left_s, 0.0))
        except TimeoutError:
            self._hand_on()
            raise sqlite3.OperationalError(
                f"database is locked (waited {timeout_s:g} s for the writers of another "
                f"process, the holder of {process.path})"
            ) from None
        except OSError as exc:  # the lock file cannot be made or locked here: SQLite's lock only
            logger.warning(
                "SQLite writers of other processes will meet this one in SQLite's busy "
                "handler: cannot lock {}: {}",
                process.path,
                exc,
            )
            self._process = None
        except BaseException:
            self._hand_on()
            raise

    def try_acquire(self) -> bool:
        """Take the turn if nobody holds it here and the lock between processes is free now.
        A lock file that cannot be locked is left to ``acquire`` (which says so, once)."""
        if self._held:
            return False
        process = self._process
        if process is not None:
            try:
                if not process.try_acquire():
                    return False
            except OSError:
                return False
        self._held = True
        self._began()
        return True

    def _began(self) -> None:
        if self._watchers:
            for watcher in tuple(self._watchers):
                watcher.turn_began()

    async def _wait(self, *, store: bool, timeout_s: float) -> None:
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        queue = self._stores if store else self._others
        queue.append(waiter)
        try:
            async with asyncio.timeout(timeout_s):
                await waiter
        except BaseException as exc:
            if waiter.done() and not waiter.cancelled():
                self._hand_on()  # handed the turn as the wait ended: pass it on
            else:
                with contextlib.suppress(ValueError):
                    queue.remove(waiter)
            if isinstance(exc, TimeoutError):
                raise sqlite3.OperationalError(
                    f"database is locked (waited {timeout_s:g} s for this process's other "
                    "writers; a store's statement run from inside an open transaction on the "
                    "same SQLite database waits for itself)"
                ) from None
            raise

    def waiting(self) -> tuple[int, int]:
        return (
            sum(not waiter.done() for waiter in self._stores),
            sum(not waiter.done() for waiter in self._others),
        )

    def waits_for_another_process(self) -> bool:
        return self._process is not None and self._process.waiting

    def close(self) -> None:
        if self._process is not None and not self._held:
            self._process.close()

    def release(self) -> None:
        """End the turn: the lock between processes let go, the turn handed on (``_hand_on``)."""
        if self._watchers:
            for watcher in tuple(self._watchers):
                watcher.turn_ending()
        if self._process is not None:
            self._process.release()
        self._hand_on()

    def _hand_on(self) -> None:
        """Hand the turn to the next waiter, or free it: a waiting store group once
        ``STORE_TURN_AFTER`` transactions have had the turn since it began to wait (or none
        waits), else the longest-waiting transaction."""
        self._drop_done()
        if self._stores and (self._passed >= STORE_TURN_AFTER or not self._others):
            self._passed = 0
            self._stores.popleft().set_result(None)
        elif self._others:
            self._passed += 1 if self._stores else 0
            self._others.popleft().set_result(None)
        else:
            self._held = False

    def _drop_done(self) -> None:
        for queue in (self._stores, self._others):
            while queue and queue[0].done():
                queue.popleft()
