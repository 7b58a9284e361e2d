"""orm_sqlalchemy/_compat.py: asyncpg's private class for an argument it cannot encode is still
there (if it goes, such a value is translated as any asyncpg error: this says so on upgrade)."""

from __future__ import annotations

import pytest

from orm_sqlalchemy._compat import asyncpg_argument_error
from orm_sqlalchemy._database import asyncpg_errors


def test_asyncpg_keeps_its_argument_error_class() -> None:
    asyncpg = pytest.importorskip("asyncpg")
    found = asyncpg_argument_error(asyncpg)
    assert found is asyncpg.exceptions._base.DataError, (
        "asyncpg no longer has exceptions._base.DataError: see orm_sqlalchemy/_compat.py"
    )
    assert found is not asyncpg.exceptions.DataError
    assert asyncpg_errors.ArgumentError is found


def test_without_the_attribute_the_class_stands_for_nothing_raised() -> None:
    class Exceptions:
        pass

    class Asyncpg:
        exceptions = Exceptions

    absent = asyncpg_argument_error(Asyncpg)
    assert issubclass(absent, Exception)
    assert absent.__module__ == "orm_sqlalchemy._compat"
