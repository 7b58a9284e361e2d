"""The SQLite database file: where it is, created private (0600), or refused when missing.

SQLite creates a missing database file at the first connection, with the process's umask
(0644 as a rule): every local user could read the jobs' payloads and errors. An engine of
``create_engine`` creates the file itself first, ``O_EXCL`` with mode 0600, so SQLite opens an
empty private file; its ``-wal`` and ``-shm`` files take the database file's mode (SQLite's
rule for them), so they are 0600 too. A file that exists is never touched.

A store that may create nothing (``create_tables=False``, as the CLI's read-only commands open
it) refuses a missing file before it connects (``require_database``): opening it would leave
an empty database behind a mistyped path.
"""

from __future__ import annotations

import contextlib
import os
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from sqlalchemy import event
from sqlalchemy.engine import URL
from sqlalchemy.ext.asyncio import AsyncEngine

from jobs.errors import StoreSchemaError

__all__ = ["DATABASE_FILE_MODE", "database_path", "private_database_files", "require_database"]

DATABASE_FILE_MODE = 0o600
_PRIVATE_FLAG = "_neverlost_private_sqlite_files"


def database_path(url: URL) -> str | None:
    """The file of the SQLite database at ``url`` (absolute, links resolved); None for an
    in-memory one (``:memory:``, ``mode=memory``, ``vfs=memdb``)."""
    database = url.database or ""
    if str(url.query.get("uri", "")).lower() in ("true", "1"):
        # SQLAlchemy moves the URI's parameters into the URL's query; a few may stay behind.
        parts = urlsplit(database)
        options = {**parse_qs(parts.query), **{k: [str(v)] for k, v in url.query.items()}}
        if options.get("mode") == ["memory"] or options.get("vfs") == ["memdb"]:
            return None
        if parts.scheme != "file":
            return None
        database = unquote(parts.path)
    if database in ("", ":memory:"):
        return None
    return os.path.realpath(database)


def private_database_files(engine: AsyncEngine) -> None:
    """Before each new connection of a SQLite ``engine``, create its missing database file
    with mode 0600 (see the module docstring). Idempotent; nothing for in-memory databases."""
    sync_engine = engine.sync_engine
    path = database_path(engine.url)
    if path is None or getattr(sync_engine, _PRIVATE_FLAG, False):
        return

    def before_connect(*_args: Any) -> None:
        with contextlib.suppress(FileExistsError):
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, DATABASE_FILE_MODE))

    event.listen(sync_engine, "do_connect", before_connect)
    setattr(sync_engine, _PRIVATE_FLAG, True)


def require_database(url: URL) -> None:
    """StoreSchemaError naming the file unless the SQLite database at ``url`` exists."""
    path = database_path(url)
    if path is not None and not os.path.exists(path):
        raise StoreSchemaError(
            f"no SQLite database at {path!r} (a store with create_tables=False creates none)"
        )
