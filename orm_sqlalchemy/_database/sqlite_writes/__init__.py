"""How a write on SQLite is scheduled: the whole of it, in one place.

SQLite has one write lock per file, and no queue for it: a writer that finds it taken sleeps in
SQLite's busy handler with growing pauses (1, 2, 5 ... 100 ms) and tries again, so under load
a waiting writer sleeps past the moment the lock is free and the order is left to chance. Every
commit also waits for an fsync (``synchronous=FULL``). Measured (figures in each module), both
cost seconds of commit-to-handler latency at p99 with 10 producers beside a relay and a runner.
So neverlost never lets its own writers meet in the busy handler:

1. **One turn at a time in the process** (``turns``: ``SQLiteWriterGate``, ``WriterTurns``). A
   configured engine has a writer gate (``writer_gate(engine)``), made by ``configure_sqlite``
   (``begin.attach_writer_gate``). Each writer waits on the gate for its *turn*, holds the write
   lock for that turn only, and hands it to the next writer in the next loop iteration. A
   waiting store group gets the turn after at most ``STORE_TURN_AFTER`` app transactions.
2. **Between processes, a lock the kernel hands over** (``process_lock``:
   ``ProcessWriterLock``, ``flock`` on ``<database>-neverlost-writer.lock``): the turn's holder
   also holds it, so the app and a ``neverlost worker`` on one file queue in the kernel, which
   wakes the next process when the holder lets go or dies.
3. **App transactions take their turn at BEGIN** (``begin.take_turn_at_begin``, ``TurnSlot``):
   the transaction manager (and the inbox) open a slot in their context (``open_turn_slot``);
   the engine's ``begin`` listener waits there for the turn before ``BEGIN IMMEDIATE`` and the
   slot gives it back after COMMIT/ROLLBACK. A task whose own transaction holds the lock is
   refused a store statement at once (``waits_for_itself``), not left to wait for itself.
4. **The stores' statements share commits** (``group_commit``: ``SQLiteBackend``, one
   aiosqlite connection per store). Statements that arrive while a group waits for its turn
   join it and run in one ``BEGIN IMMEDIATE`` ... ``COMMIT`` (one fsync for all; each caller
   gets its own result); a lone statement that finds the turn free runs at once from its
   caller's task.
5. **Waiters hear other connections' commits** (``commits``: ``SQLiteCommits``, ``PRAGMA
   data_version``): SQLite has no LISTEN, so an idle runner or relay watches the file's commit
   counter, reading it as each turn of its own engine begins and ends so that its own commits
   do not wake it.

What is not covered: a transaction opened another way (``engine.begin()`` without the manager,
another tool on the file, any writer on Windows, which has no ``flock``) still meets the lock in
SQLite's busy handler (``BUSY_TIMEOUT_MS``), as before; an in-memory database has no lock file.
"""

from .begin import attach_writer_gate, take_turn_at_begin
from .commits import WATCH_INTERVAL_S, SQLiteCommits, sqlite_commits
from .group_commit import Script, SQLiteBackend
from .process_lock import LOCK_SUFFIX, ProcessWriterLock, writer_lock_path
from .turns import (
    GATE_ATTRIBUTE,
    STORE_TURN_AFTER,
    SQLiteWriterGate,
    TurnSlot,
    TurnWatcher,
    WriterTurns,
    close_turn_slot,
    open_turn_slot,
    turn_slot,
    waits_for_itself,
    writer_gate,
)

__all__ = [
    "GATE_ATTRIBUTE",
    "LOCK_SUFFIX",
    "STORE_TURN_AFTER",
    "WATCH_INTERVAL_S",
    "ProcessWriterLock",
    "SQLiteBackend",
    "Script",
    "SQLiteCommits",
    "SQLiteWriterGate",
    "TurnSlot",
    "TurnWatcher",
    "WriterTurns",
    "attach_writer_gate",
    "close_turn_slot",
    "open_turn_slot",
    "sqlite_commits",
    "take_turn_at_begin",
    "turn_slot",
    "waits_for_itself",
    "writer_gate",
    "writer_lock_path",
]
