"""Errors of the orm_sqlalchemy package.

SQLAlchemyJobsError
 +-- NoTransactionError     ``tm.session`` / ``current_session()`` / an outbox append with no
                            transaction open in this context
Store failures are reported with the jobs package's types (``StoreUnavailableError``,
``StoreSchemaError``), which callers already handle for every driver.
"""

from __future__ import annotations


class SQLAlchemyJobsError(Exception):
    """Root of the errors raised by orm_sqlalchemy itself."""


class NoTransactionError(SQLAlchemyJobsError, LookupError):
    """No transaction is open in the current context."""
