"""Where an engine meets the writer gate: made with the engine, taken at a transaction's BEGIN.

``configure_sqlite`` (``orm_sqlalchemy.engine``) calls ``attach_writer_gate`` once per engine
and ``take_turn_at_begin`` from its ``begin`` listener, in SQLAlchemy's greenlet, before it
sends ``BEGIN IMMEDIATE``: a transaction opened by the transaction manager (or an inbox) has a
``TurnSlot`` in its context and waits there for the process's write turn, not in SQLite's busy
handler. A DEFERRED transaction (a long read) takes no turn.
"""

from __future__ import annotations

import sqlite3

from sqlalchemy import event
from sqlalchemy.engine import Engine
from sqlalchemy.exc import DBAPIError

try:
    from sqlalchemy.util import await_ as _await  # SQLAlchemy 2.1
except ImportError:  # pragma: no cover - SQLAlchemy 2.0
    from sqlalchemy.util import await_only as _await

from .process_lock import writer_lock_path
from .turns import GATE_ATTRIBUTE, SQLiteWriterGate, turn_slot

__all__ = ["attach_writer_gate", "take_turn_at_begin"]


def attach_writer_gate(sync_engine: Engine, busy_timeout_ms: int) -> SQLiteWriterGate:
    """The engine's writer gate, made now (its lock file beside the database), found again by
    ``writer_gate(engine)``, closed when the engine is disposed."""
    gate = SQLiteWriterGate(busy_timeout_ms / 1000, lock_path=writer_lock_path(sync_engine.url))
    event.listen(sync_engine, "engine_disposed", lambda _engine: gate.close())
    setattr(sync_engine, GATE_ATTRIBUTE, gate)
    return gate


def take_turn_at_begin(gate: SQLiteWriterGate, mode: str) -> None:
    """Wait for ``gate``'s turn into this context's slot, if it has one without a turn and
    ``mode`` writes; a turn that cannot be had (the busy timeout) is SQLAlchemy's error for the
    BEGIN, as SQLite's own "database is locked" would be."""
    slot = turn_slot.get()
    if slot is not None and slot.turns is None and mode != "DEFERRED":
        try:
            _await(slot.take(gate))
        except sqlite3.OperationalError as exc:
            raise DBAPIError.instance(f"BEGIN {mode}", None, exc, sqlite3.Error) from exc
