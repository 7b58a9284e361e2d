"""Harnesses for the SQL job store: a SQLite file in tmp_path, or a random table prefix on PG.

PostgreSQL tests need the server on 127.0.0.1:5432 (database ``test``, user ``postgres``; or
``TEST_POSTGRES_URL``) and fail when it is absent. Each harness uses its own table prefix and
drops its tables at cleanup; nothing else in the database is touched.
"""

from __future__ import annotations

import sqlite3
import uuid
from pathlib import Path
from typing import Any

from sqlalchemy import text

from jobs.clock import ManualClock
from jobs.spi import JobDriver
from orm_sqlalchemy.engine import create_engine
from orm_sqlalchemy.factory import drop
from orm_sqlalchemy.store import SQLAlchemyJobStore
from tests.stores import POSTGRES_URL


class StoreHarness:
    """Opens stores on one database and prefix, all reading ``clock`` unless told otherwise."""

    def __init__(self, backend: str, tmp_path: Path, *, url: str | None = None) -> None:
        """``backend``: "sqlite", "postgres", or "pgbouncer" (PostgreSQL at ``url``)."""
        self.backend = backend
        self.clock = ManualClock()
        self.prefix = f"t{uuid.uuid4().hex[:10]}_"
        self.table = f"{self.prefix}queue"
        self.url = url or (
            POSTGRES_URL if self.postgres else f"sqlite+aiosqlite:///{tmp_path / 'jobs.db'}"
        )
        self._stores: list[SQLAlchemyJobStore] = []
        if not self.postgres:
            # Two connections switching a brand-new file to WAL at once can fail one of them
            # with "database is locked" at once (SQLite does not wait on that upgrade), so the
            # file starts out in WAL mode, as after any first start.
            with sqlite3.connect(tmp_path / "jobs.db") as conn:
                conn.execute("PRAGMA journal_mode = WAL")

    @property
    def postgres(self) -> bool:
        return self.backend in ("postgres", "pgbouncer")

    async def driver(
        self, *, retain_completed_ms: int | None = None, retain_failed_ms: int | None = None
    ) -> JobDriver:
        return self.store(
            retain_completed_ms=retain_completed_ms, retain_failed_ms=retain_failed_ms
        )

    def store(self, **options: Any) -> SQLAlchemyJobStore:
        """A new store object on the harness's table (its own engine unless ``engine=``)."""
        options.setdefault("table_prefix", self.prefix)
        options.setdefault("clock", self.clock)
        url = None if "engine" in options else self.url
        store = SQLAlchemyJobStore(url, **options)
        self._stores.append(store)
        return store

    async def sql(self, statement: str, **params: Any) -> list[Any]:
        """Run ``statement`` on a separate engine (``{table}`` is the harness's table)."""
        engine = create_engine(self.url)
        try:
            async with engine.begin() as conn:
                result = await conn.execute(text(statement.format(table=self.table)), params)
                return list(result.all()) if result.returns_rows else []
        finally:
            await engine.dispose()

    async def corrupt(self, job_id: str) -> str:
        """Make the stored job malformed behind the store's back (the conformance hook): a
        timeout no worker can use, text on SQLite (its INTEGER column keeps it), negative on
        PostgreSQL. The field's name."""
        value = "nan" if not self.postgres else -5
        statement = 'UPDATE "{table}" SET timeout_ms = :value WHERE id = :id'
        await self.sql(statement, value=value, id=job_id)
        return "timeout_ms"

    async def cleanup(self) -> None:
        for store in self._stores:
            await store.close()
        if self.postgres:
            await drop(self.url, self.prefix)
