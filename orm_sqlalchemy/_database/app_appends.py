"""``SQLAlchemyOutboxStore.append_in``'s work on the app's own session or connection.

One INSERT on the app's connection (``text()`` of the store's ``append`` statement: any driver
binds it), the table created there first if the store has not seen it yet (as ``append`` does),
and a callback for after the app's commit (``app_commits``) that wakes the relay: on the store's
event loop when it has one (the loop of its last ``wait_for_entries``), from whatever thread
committed; else, on PostgreSQL, by a NOTIFY from the ``SyncNotifier``'s thread. A commit on a
running event loop (an ``AsyncSession``) wakes as ``append``'s commit does.
"""

from __future__ import annotations

import asyncio
import os
import weakref
from collections.abc import Callable
from typing import Any, Protocol

from sqlalchemy import URL, Connection, Engine, Table, TextClause, text
from sqlalchemy.ext.asyncio import AsyncEngine
from sqlalchemy.orm import Session

from jobs.spi.support import redact_url

from ..tables import lock_for_creation_sync
from .app_commits import SyncNotifier, after_connection_commit, after_session_commit

__all__ = ["AppAppends", "OutboxHost", "other_database"]


class OutboxHost(Protocol):
    """What ``AppAppends`` reads of the outbox store it serves (``SQLAlchemyOutboxStore``):
    named here so this module does not import the store's (which imports this one)."""

    @property
    def _engine(self) -> AsyncEngine: ...
    @property
    def _table(self) -> Table: ...
    @property
    def _schema_ready(self) -> bool: ...
    @property
    def _closed(self) -> bool: ...
    def _create_and_check(self, connection: Connection) -> None: ...
    def _mark_schema_ready(self) -> None: ...
    def _on_commit(self) -> None: ...


class AppAppends:
    """``append_in`` for one store (its private state is the store's, read here)."""

    def __init__(
        self, store: OutboxHost, statement: str, *, channel: str | None
    ) -> None:
        self._store = store
        self._statement: TextClause = text(statement)
        self._channel = channel
        self._databases: weakref.WeakKeyDictionary[Engine, str | None] = (
            weakref.WeakKeyDictionary()
        )
        self._notifier: SyncNotifier | None = None
        self.loop: asyncio.AbstractEventLoop | None = None
        """The loop the store's relay waits on (set by ``wait_for_entries``)."""

    def check_database(self, engine: Engine | Connection) -> None:
        """ValueError, before any I/O, if ``engine`` is plainly on another database than the
        store's (worked out once per engine)."""
        if isinstance(engine, Connection):
            engine = engine.engine
        if engine not in self._databases:
            self._databases[engine] = other_database(self._store._engine.url, engine.url)
        problem = self._databases[engine]
        if problem is not None:
            raise ValueError(
                f"append_in: the session is on {redact_url(engine.url)}, {problem}. The outbox "
                f"store {self._store!r} writes to its own database, whose table the relay "
                "reads: open the session on the store's database, or give the store that "
                "database's URL"
            )

    def in_session(self, session: Session, params: dict[str, Any]) -> str | None:
        connection = session.connection()
        callback = self._insert(connection, params)
        if callback is None:
            return None
        after_session_commit(session, self, callback)
        return str(params["id"])

    def in_connection(self, connection: Connection, params: dict[str, Any]) -> str | None:
        callback = self._insert(connection, params)
        if callback is None:
            return None
        after_connection_commit(connection, self, callback)
        return str(params["id"])

    def close(self) -> None:
        """Send the NOTIFY due, if any, and stop the notifier's thread."""
        if self._notifier is not None:
            self._notifier.close()

    def _insert(self, connection: Connection, params: dict[str, Any]) -> Callable[[], None] | None:
        """Run the INSERT; the after-commit callback, or None when the key is taken."""
        store = self._store
        created = False
        if not store._schema_ready:
            lock_for_creation_sync(connection, "outbox", store._table.fullname)
            store._create_and_check(connection)
            created = True
        if connection.execute(self._statement, params).scalar() is None:
            return None
        engine = connection.engine

        def committed() -> None:
            if created:
                store._mark_schema_ready()
            self._committed(engine)

        return committed

    def _committed(self, engine: Engine) -> None:
        store = self._store
        if store._closed:
            return
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            pass
        else:  # an AsyncSession's commit: as append's
            store._on_commit()
            return
        loop = self.loop
        if loop is not None and not loop.is_closed():
            try:
                loop.call_soon_threadsafe(store._on_commit)
                return
            except RuntimeError:  # closed meanwhile
                pass
        if self._channel is not None:
            if self._notifier is None:
                self._notifier = SyncNotifier(self._channel, name=repr(store))
            self._notifier.announce(engine)


def other_database(store: URL, app: URL) -> str | None:
    """Why ``app`` is not the store's database, when the two URLs make it plain; None when it
    may be the same (two host names of one server, or a pooler, are not told apart)."""
    store_kind, app_kind = store.get_backend_name(), app.get_backend_name()
    if store_kind != app_kind:
        return f"a {app_kind} database, not the store's {store_kind} one"
    if store_kind == "sqlite":
        if _in_memory(app.database):
            return "an in-memory SQLite database, not the store's file"
        if os.path.realpath(str(app.database)) != os.path.realpath(str(store.database)):
            return f"the SQLite file {app.database!r}, not the store's {store.database!r}"
        return None
    if (app.database or "") != (store.database or ""):
        return f"the database {app.database!r}, not the store's {store.database!r}"
    return None


def _in_memory(database: str | None) -> bool:
    return database in (None, "", ":memory:") or "mode=memory" in str(database)
