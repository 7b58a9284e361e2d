"""Database failures as ``jobs.errors`` types, and the engines the SQL stores can run on.

Driver exceptions (asyncpg, sqlite3, SQLAlchemy's wrappers of them) become ``jobs.errors``
types here, at the boundary: a database that cannot be reached or is not ready (refused,
shutting down, starting up, too many connections, a pooled connection the server killed) is
a ``StoreUnavailableError`` (callers retry it, riding through a restart), tables that do not
fit are a ``StoreSchemaError``, a value the database refused (out of its column's range, of
the wrong type: a DataError) a ``StoreValueError`` (a ValueError), anything else a
``DriverError``.
"""

from __future__ import annotations

import sqlite3

from sqlalchemy.exc import DBAPIError, SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncEngine
from sqlalchemy.pool import StaticPool

from jobs.errors import DriverError, StoreSchemaError, StoreUnavailableError, StoreValueError

from . import asyncpg_errors as pg

__all__ = ["check_engine", "is_value_error", "store_error"]

_PG_UNAVAILABLE = (
    pg.PostgresConnectionError,  # class 08
    pg.OperatorInterventionError,  # 57: shutdown, cannot connect now, canceled
    pg.InsufficientResourcesError,  # 53: too many connections, disk full
    pg.ConnectionDoesNotExistError,
)
_LOST_CONNECTION_HINTS = (
    "another operation is in progress",  # a pooled connection the server killed mid-protocol
    "connection is closed",
    "connection was closed",
    "the database system is",  # shutting down / starting up / in recovery mode
)
"""asyncpg InterfaceErrors (and wrapped messages) that mean the connection is gone, not misuse."""
_PG_SCHEMA = (pg.UndefinedTableError, pg.UndefinedColumnError)
_SQLITE_SCHEMA_HINTS = ("no such table", "no such column", "has no column")
_VALUE_ERRORS = (pg.DataError, pg.ArgumentError, sqlite3.DataError, OverflowError)
"""A value the database (or its driver, encoding an argument) refused: not a lost connection,
though SQLAlchemy marks the connection of an asyncpg argument error invalidated."""



def store_error(exc: Exception, store: str) -> DriverError:
    """The ``jobs.errors`` type for a failure of ``store``, caused by ``exc``."""
    if isinstance(exc, DriverError):
        return exc
    error = _translate(exc, store)
    error.__cause__ = exc
    return error


def _translate(exc: Exception, store: str) -> DriverError:
    if isinstance(exc, DBAPIError) and exc.orig is not None:
        value_error = _value_error(exc.orig)
        if value_error is not None:
            return StoreValueError(f"{store} refused a value: {value_error}")
        if exc.connection_invalidated:
            return StoreUnavailableError(f"{store} lost its database connection: {exc.orig}")
        cause = exc.orig.__cause__ if isinstance(exc.orig.__cause__, Exception) else exc.orig
        return store_error(cause, store)
    if isinstance(exc, _VALUE_ERRORS):
        return StoreValueError(f"{store} refused a value: {exc}")
    if isinstance(exc, _PG_SCHEMA) or (
        isinstance(exc, sqlite3.OperationalError)
        and any(hint in str(exc) for hint in _SQLITE_SCHEMA_HINTS)
    ):
        return StoreSchemaError(f"{store} does not fit the database's tables: {exc}")
    driver_cause = exc.__cause__
    if isinstance(driver_cause, pg.PostgresError | pg.InterfaceError | OSError):
        # SQLAlchemy's adapted DBAPI error, raised bare by a pool connect: its driver cause.
        return _translate(driver_cause, store)
    if isinstance(exc, (OSError, sqlite3.OperationalError, *_PG_UNAVAILABLE)) or any(
        hint in str(exc) for hint in _LOST_CONNECTION_HINTS
    ):
        reason = str(exc) or type(exc).__name__
        return StoreUnavailableError(f"{store} cannot reach its database: {reason}")
    if isinstance(exc, pg.UniqueViolationError | sqlite3.IntegrityError):
        return DriverError(f"{store} refused a duplicate: {exc}")
    if isinstance(exc, pg.PostgresError | pg.InterfaceError | sqlite3.Error):
        return DriverError(f"{store} failed a statement: {exc}")
    if isinstance(exc, SQLAlchemyError):
        return DriverError(f"{store} failed: {exc}")
    return DriverError(f"{store} failed: {type(exc).__name__}: {exc}")


def is_value_error(exc: BaseException) -> bool:
    """Whether ``exc`` is a value the database or its driver refused (a DataError)."""
    return _value_error(exc) is not None


def _value_error(exc: BaseException) -> BaseException | None:
    """The DataError in ``exc`` or its cause (a DBAPI wrapper of asyncpg's), if any."""
    for candidate in (exc, exc.__cause__):
        if isinstance(candidate, _VALUE_ERRORS):
            return candidate
    return None


def check_engine(engine: AsyncEngine, *, store: str = "SQLAlchemyJobStore") -> None:
    """ValueError unless ``store`` can open connections of its own on ``engine``."""
    dialect = engine.dialect
    if (dialect.name, dialect.driver) not in {("postgresql", "asyncpg"), ("sqlite", "aiosqlite")}:
        raise ValueError(
            f"{store} runs on sqlite+aiosqlite or postgresql+asyncpg, "
            f"not {dialect.name}+{dialect.driver}"
        )
    if dialect.name == "sqlite" and engine.url.database in (None, "", ":memory:"):
        raise ValueError(f"{store} needs a SQLite file: an in-memory database is per connection")
    if isinstance(engine.pool, StaticPool):
        raise ValueError(f"{store} needs an engine that can open connections, not StaticPool")
