"""A job completed in the app's transaction (``jobs.spi.CompletesInTransaction``).

``SQLAlchemyJobStore.complete_in`` runs the store's own ``finish`` statement (fenced by the
lease token, as ``complete`` is) through ``text()`` on a connection of the app's, so the
change commits or rolls back with the app's transaction. ``same_database`` says whether such a
connection reaches the store's table; when the URLs do not make it certain, it says no, and
the runner settles the job as usual.
"""

from __future__ import annotations

import weakref
from typing import Any

from sqlalchemy import URL, Connection, Engine, TextClause, text
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from .._sqlite_files import database_path
from .app_appends import other_database
from .statements import text_statement

__all__ = ["InTransactionCompletion", "same_database"]

_PG_PORT = 5432


class InTransactionCompletion:
    """The ``finish`` statement of one job table, for connections of the app's."""

    def __init__(self, engine: AsyncEngine, quoted_table: str) -> None:
        self._engine = engine
        self._statement: TextClause = text(
            text_statement(engine.dialect.name, quoted_table, "finish", resource="jobs")
        )
        self._same: weakref.WeakKeyDictionary[Engine, bool] = weakref.WeakKeyDictionary()

    def reaches(self, bind: Any) -> bool:
        """Whether ``bind`` (an Engine or a Connection) is on this table's database."""
        engine = bind.engine if hasattr(bind, "engine") else bind
        if not isinstance(engine, Engine):
            return False
        known = self._same.get(engine)
        if known is None:
            known = self._same[engine] = engine is self._engine.sync_engine or (
                same_database(self._engine.url, engine.url)
            )
        return known

    async def complete(self, connection: AsyncConnection, params: dict[str, Any]) -> bool:
        """Run ``finish`` on ``connection`` (in its open transaction); whether it completed."""
        result = await connection.execute(self._statement, params)
        return result.first() is not None

    def complete_sync(self, connection: Connection, params: dict[str, Any]) -> bool:
        """``complete`` on a sync ``connection`` of the app's (a ``def`` handler's thread)."""
        return connection.execute(self._statement, params).first() is not None


def same_database(store: URL, app: URL) -> bool:
    """Whether the two URLs certainly name one database: one SQLite file (not in memory), or
    one PostgreSQL database on the same host and port (``other_database`` also allows two
    names of one server; here that is not certain enough)."""
    if other_database(store, app) is not None:
        return False
    if store.get_backend_name() == "sqlite":
        return database_path(store) is not None
    return (store.host or "localhost", store.port or _PG_PORT) == (
        app.host or "localhost",
        app.port or _PG_PORT,
    )
