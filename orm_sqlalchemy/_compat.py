"""Every read of a private attribute of another library in ``orm_sqlalchemy``.

- ``asyncpg_argument_error``: asyncpg's client-side ``DataError`` (``exceptions._base``, an
  ``InterfaceError`` and ``ValueError``; not the public ``asyncpg.exceptions.DataError``,
  SQLSTATE class 22), "an error caused by invalid query input". The error translation
  (``_database.asyncpg_errors.ArgumentError``) reports it as the caller's mistake, not an
  outage. (The asyncpg locked on 2026-12-05 raises the public class for an argument it cannot
  encode: both are in the translation's value errors.) Without the attribute the class stands
  for nothing raised. ``tests/unit/orm/test_compat.py`` fails loudly when it disappears.
"""

from __future__ import annotations

from typing import Any

__all__ = ["asyncpg_argument_error"]


class _Absent(Exception):
    """Stands for a private class a later asyncpg no longer has (nothing raises it)."""


def asyncpg_argument_error(asyncpg: Any) -> type[Exception]:
    """The class asyncpg raises for an argument it cannot encode (``exceptions._base``)."""
    base = getattr(asyncpg.exceptions, "_base", None)
    found = getattr(base, "DataError", None)
    return found if isinstance(found, type) and issubclass(found, Exception) else _Absent
