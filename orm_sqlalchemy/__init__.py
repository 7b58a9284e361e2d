"""Durable jobs and the transactional outbox on SQLAlchemy (SQLite via aiosqlite, PostgreSQL)."""

from .errors import NoTransactionError, SQLAlchemyJobsError

__all__ = [
    "NoTransactionError",
    "SQLAlchemyJobsError",
]
