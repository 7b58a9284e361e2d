"""After the app's own session or connection commits: callbacks, and NOTIFY from sync code.

``SQLAlchemyOutboxStore.append_in`` writes through a ``Session``/``Connection`` (or their async
twins) that the app opened itself, so no transaction manager of ours sees the commit. The
callbacks it leaves run after that commit, never after a rollback, through SQLAlchemy's events:

* **Session** (and ``AsyncSession.sync_session``): ``after_commit`` of the outermost
  transaction runs them; ``after_transaction_end`` of the outermost one drops what is left (a
  rollback, a close). A savepoint's release also dispatches ``after_commit``; it is skipped.
  The listeners are registered once, on the ``Session`` class (every session of the process,
  subclasses too); a session that never appended pays one dict look-up per transaction.
* **Connection** (and ``AsyncConnection.sync_connection``): SQLAlchemy has no event after a
  connection's COMMIT (its ``commit`` event comes just before it). So ``commit`` marks the
  callbacks committed, ``rollback`` drops them, and they run at the first of the connection's
  next ``begin`` or its return to the pool (``checkin``): after the commit, and at once in the
  usual ``with engine.begin() as conn:``. These listeners are registered once per engine.

The callbacks run in the thread that committed, outside the transaction, in order; one that
fails is logged and the rest still run (the commit stands).

``SyncNotifier``: a PostgreSQL NOTIFY for a commit made where no event loop of the store runs (a
Flask view, a script). It goes out after the commit, on a connection of the app's engine of its
own, from one thread per store, coalesced: the committing thread only records that one is due,
the thread sends one round trip for whatever came in meanwhile (``notify_script``) and exits
after ``IDLE_S`` with nothing to send. Best effort, as every wake-up: a failure is logged and
the listeners poll.
"""

from __future__ import annotations

import threading
import time
import uuid
import weakref
from collections.abc import Callable
from typing import Any

from loguru import logger
from sqlalchemy import Connection, Engine, event
from sqlalchemy.orm import Session, SessionTransaction
from sqlalchemy.pool import ConnectionPoolEntry

from .wakeup import NOTIFY_SPACING_S, notify_script

__all__ = ["IDLE_S", "SyncNotifier", "after_connection_commit", "after_session_commit"]

Callback = Callable[[], None]

_PENDING = "neverlost_after_commit"
_COMMITTED = "neverlost_committed"
IDLE_S = 1.0
"""A ``SyncNotifier`` thread with nothing to send for this long exits (the next starts one)."""

_session_listening = False
_session_lock = threading.Lock()
_engines: weakref.WeakSet[Engine] = weakref.WeakSet()


def after_session_commit(session: Session, key: object, callback: Callback) -> None:
    """Run ``callback`` once ``session``'s outermost transaction commits; nothing if it rolls
    back. A second call with the same ``key`` in one transaction is ignored."""
    _listen_to_sessions()
    session.info.setdefault(_PENDING, {}).setdefault(key, callback)


def after_connection_commit(connection: Connection, key: object, callback: Callback) -> None:
    """Run ``callback`` after ``connection``'s transaction commits (at its next BEGIN or when
    it goes back to the pool); nothing if it rolls back. One callback per ``key``."""
    _listen_to_engine(connection.engine)
    connection.info.setdefault(_PENDING, {}).setdefault(key, callback)


def _listen_to_sessions() -> None:
    global _session_listening
    if _session_listening:
        return
    with _session_lock:
        if not _session_listening:
            event.listen(Session, "after_commit", _session_committed)
            event.listen(Session, "after_transaction_end", _session_ended)
            _session_listening = True


def _session_committed(session: Session) -> None:
    if session.in_nested_transaction():
        return  # a savepoint released: the outer transaction may still roll back
    callbacks = session.info.pop(_PENDING, None)
    if callbacks:
        _run(callbacks)


def _session_ended(session: Session, transaction: SessionTransaction) -> None:
    if transaction.parent is None:
        session.info.pop(_PENDING, None)


def _listen_to_engine(engine: Engine) -> None:
    if engine in _engines:
        return
    with _session_lock:
        if engine not in _engines:
            event.listen(engine, "commit", _connection_committing)
            event.listen(engine, "rollback", _connection_rolled_back)
            event.listen(engine, "begin", _connection_begins)
            event.listen(engine, "checkin", _connection_checked_in)
            _engines.add(engine)


def _connection_committing(connection: Connection) -> None:
    info = connection.info
    pending = info.pop(_PENDING, None)
    if pending:
        info.setdefault(_COMMITTED, {}).update(pending)


def _connection_rolled_back(connection: Connection) -> None:
    info = connection.info
    info.pop(_PENDING, None)
    info.pop(_COMMITTED, None)


def _connection_begins(connection: Connection) -> None:
    callbacks = connection.info.pop(_COMMITTED, None)
    if callbacks:
        _run(callbacks)


def _connection_checked_in(dbapi_connection: Any, record: ConnectionPoolEntry) -> None:
    info = record.info
    info.pop(_PENDING, None)  # given back mid-transaction: the pool rolls it back
    callbacks = info.pop(_COMMITTED, None)
    if callbacks:
        _run(callbacks)


def _run(callbacks: dict[object, Callback]) -> None:
    for callback in callbacks.values():
        try:
            callback()
        except Exception:
            logger.opt(exception=True).error(
                "after-commit callback {callback!r} failed; the commit stands", callback=callback
            )


class SyncNotifier:
    """NOTIFY ``channel`` after commits made outside any event loop (see the module)."""

    def __init__(self, channel: str, *, name: str) -> None:
        self._channel = channel
        self._name = name
        self._origin = uuid.uuid4().hex
        self._condition = threading.Condition()
        self._pending: dict[Engine, None] = {}
        self._thread: threading.Thread | None = None
        self._closed = False
        self._last_sent = 0.0

    def announce(self, engine: Engine) -> None:
        """A commit on ``engine`` appended: notify (soon, from the notifier's thread)."""
        with self._condition:
            if self._closed:
                return
            self._pending[engine] = None
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._serve, name=f"{self._name} sync notifications", daemon=True
                )
                self._thread.start()
            else:
                self._condition.notify()

    def close(self) -> None:
        """Send what is due, then stop the thread (waits for it). Idempotent."""
        with self._condition:
            self._closed = True
            thread = self._thread
            self._condition.notify()
        if thread is not None and thread is not threading.current_thread():
            thread.join()

    def _serve(self) -> None:
        while True:
            with self._condition:
                if not self._pending and not self._closed:
                    self._condition.wait(IDLE_S)
                if not self._pending:
                    self._thread = None
                    return
                engines, self._pending = list(self._pending), {}
            pause = self._last_sent + NOTIFY_SPACING_S - time.monotonic()
            if pause > 0:
                time.sleep(pause)
            self._last_sent = time.monotonic()
            for engine in engines:
                self._send(engine)

    def _send(self, engine: Engine) -> None:
        script = notify_script(self._channel, [f"{self._origin}:"])
        try:
            with engine.connect() as conn:
                conn = conn.execution_options(isolation_level="AUTOCOMMIT")
                conn.exec_driver_sql(script)
        except Exception as exc:
            logger.warning("{} could not notify listeners (they will poll): {}", self._name, exc)
