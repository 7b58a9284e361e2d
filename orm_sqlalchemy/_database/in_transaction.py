"""A job completed in the app's transaction (``jobs.spi.CompletesInTransaction``).

``SQLAlchemyJobStore.complete_in`` runs the store's own ``finish`` statement (fenced by the
lease token, as ``complete`` is) through ``text()`` on a connection of the app's, so the
change commits or rolls back with the app's transaction. A workflow job's (its lease token
says so) runs ``finish_workflow`` instead, its dependents settled in that same transaction (on
SQLite, the statements of ``orm_sqlalchemy.workflows.release_steps`` one after another); the
jobs that makes due are not announced (the app's transaction may yet roll back): waiting
runners find them at their next look. ``same_database`` says whether such a
connection reaches the store's table; when the URLs do not make it certain, it says no, and
the runner settles the job as usual.
"""

from __future__ import annotations

import weakref
from collections.abc import Generator
from typing import Any

from sqlalchemy import URL, Connection, Engine, TextClause, text
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from .._sqlite_files import database_path
from .app_appends import other_database
from .statements import Statement, load_statements, text_statement
from .workflows import release_steps

__all__ = ["InTransactionCompletion", "same_database"]

_PG_PORT = 5432


class InTransactionCompletion:
    """The ``finish`` statement of one job table, for connections of the app's."""

    def __init__(self, engine: AsyncEngine, quoted_table: str, quoted_edges: str = "") -> None:
        self._engine = engine
        dialect = engine.dialect.name
        self._statement: TextClause = text(
            text_statement(dialect, quoted_table, "finish", resource="jobs")
        )
        self._postgres = dialect == "postgresql"
        self._workflow: TextClause = text(
            text_statement(
                dialect, quoted_table, "finish_workflow", resource="jobs", edges=quoted_edges
            )
        )
        # SQLite's statements are in the named style text() reads
        self._sqlite_sql = (
            {} if self._postgres else load_statements(dialect, quoted_table, edges=quoted_edges)
        )
        self.release_params: dict[str, Any] = {}
        """What ``workflow_release`` binds besides the job's (set by the store)."""
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
        if not _workflow_job(params):
            result = await connection.execute(self._statement, params)
            return result.first() is not None
        if self._postgres:
            rows = await connection.execute(self._workflow, {**params, **self.release_params})
            return any(not row.released for row in rows)
        steps = self._sqlite_steps(params)
        try:
            statement, step_params = next(steps)
            while True:
                found = await connection.execute(text(statement.text), step_params)
                statement, step_params = steps.send([row._mapping for row in found])
        except StopIteration as done:
            return bool(done.value)

    def complete_sync(self, connection: Connection, params: dict[str, Any]) -> bool:
        """``complete`` on a sync ``connection`` of the app's (a ``def`` handler's thread)."""
        if not _workflow_job(params):
            return connection.execute(self._statement, params).first() is not None
        if self._postgres:
            rows = connection.execute(self._workflow, {**params, **self.release_params})
            return any(not row.released for row in rows)
        steps = self._sqlite_steps(params)
        try:
            statement, step_params = next(steps)
            while True:
                found = connection.execute(text(statement.text), step_params)
                statement, step_params = steps.send([row._mapping for row in found])
        except StopIteration as done:
            return bool(done.value)

    def _sqlite_steps(
        self, params: dict[str, Any]
    ) -> Generator[tuple[Statement, dict[str, Any]], Any, list[Any]]:
        """finish_workflow, then its dependents settled (SQLite); returns the rows it settled."""
        sql = self._sqlite_sql
        settled = yield sql["finish_workflow"], params
        yield from release_steps(sql, settled, {**self.release_params, "now": params["now"]})
        return list(settled)


def _workflow_job(params: dict[str, Any]) -> bool:
    """Whether the lease token is a workflow job's (the claim marks it with a ``w``)."""
    return "w" in str(params["lease_token"])


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
