"""The asyncpg exception classes the stores tell apart, importable without asyncpg.

asyncpg comes with the ``postgres`` extra; a SQLite-only install has none, and then nothing
can raise these: each name is a class no code raises, so the ``isinstance`` checks of the
error translation hold either way. A PostgreSQL engine without the extra is refused at
``create_engine`` with one line naming it.
"""

from __future__ import annotations

from typing import Any

from .._compat import asyncpg_argument_error


class _NotInstalled(Exception):
    """Stands for every asyncpg exception class while asyncpg is not installed."""


def _classes() -> dict[str, Any]:
    try:
        import asyncpg  # type: ignore[import-untyped]
    except ImportError:  # no postgres extra
        return {}
    exceptions = asyncpg.exceptions
    return {
        "PostgresError": asyncpg.PostgresError,
        "InterfaceError": asyncpg.InterfaceError,
        "PostgresConnectionError": asyncpg.PostgresConnectionError,
        "OperatorInterventionError": exceptions.OperatorInterventionError,
        "InsufficientResourcesError": exceptions.InsufficientResourcesError,
        "ConnectionDoesNotExistError": exceptions.ConnectionDoesNotExistError,
        "UndefinedTableError": exceptions.UndefinedTableError,
        "UndefinedColumnError": exceptions.UndefinedColumnError,
        "UniqueViolationError": exceptions.UniqueViolationError,
        "DataError": exceptions.DataError,  # class 22: a value out of range, not its type
        "ArgumentError": asyncpg_argument_error(asyncpg),  # an argument asyncpg cannot encode
    }


_FOUND = _classes()
INSTALLED = bool(_FOUND)
PostgresError: type[Exception] = _FOUND.get("PostgresError", _NotInstalled)
InterfaceError: type[Exception] = _FOUND.get("InterfaceError", _NotInstalled)
PostgresConnectionError: type[Exception] = _FOUND.get("PostgresConnectionError", _NotInstalled)
OperatorInterventionError: type[Exception] = _FOUND.get("OperatorInterventionError", _NotInstalled)
InsufficientResourcesError: type[Exception] = _FOUND.get(
    "InsufficientResourcesError", _NotInstalled
)
ConnectionDoesNotExistError: type[Exception] = _FOUND.get(
    "ConnectionDoesNotExistError", _NotInstalled
)
UndefinedTableError: type[Exception] = _FOUND.get("UndefinedTableError", _NotInstalled)
UndefinedColumnError: type[Exception] = _FOUND.get("UndefinedColumnError", _NotInstalled)
DataError: type[Exception] = _FOUND.get("DataError", _NotInstalled)
ArgumentError: type[Exception] = _FOUND.get("ArgumentError", _NotInstalled)
UniqueViolationError: type[Exception] = _FOUND.get("UniqueViolationError", _NotInstalled)
