"""A database of its own for an example's test: a SQLite file, or a PostgreSQL database created
on the test server for the test and dropped after (the examples' tables have fixed names)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from sqlalchemy import text
from sqlalchemy.engine import make_url

from orm_sqlalchemy import create_sync_engine
from tests.stores import POSTGRES_URL


@contextmanager
def fresh_database(kind: str, tmp_path: Path) -> Iterator[str]:
    """The URL of an empty database of ``kind`` ("sqlite" or "postgres")."""
    if kind == "sqlite":
        yield f"sqlite:///{tmp_path / 'example.db'}"
        return
    name = f"example_{uuid.uuid4().hex[:12]}"
    admin = create_sync_engine(POSTGRES_URL, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            conn.execute(text(f'CREATE DATABASE "{name}"'))
        try:
            yield make_url(POSTGRES_URL).set(database=name).render_as_string(hide_password=False)
        finally:
            with admin.connect() as conn:
                conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    finally:
        admin.dispose()
