"""Durable jobs and the transactional outbox on SQLAlchemy (SQLite via aiosqlite, PostgreSQL)."""

from .engine import (
    configure_sqlite,
    create_engine,
    create_sync_engine,
    is_sqlite,
    normalize_url,
    pooler_connect_args,
)
from .errors import NoTransactionError, SQLAlchemyJobsError
from .outbox import SQLAlchemyOutboxStore
from .store import SQLAlchemyJobStore
from .tables import JobSchema, OutboxSchema, job_schema, outbox_schema
from .transactions import (
    SQLAlchemyTransactionManager,
    TransactionRolledBackError,
    current_session,
    transactional,
)

__all__ = [
    "NoTransactionError",
    "SQLAlchemyJobsError",
    "TransactionRolledBackError",
    "SQLAlchemyTransactionManager",
    "transactional",
    "current_session",
    "SQLAlchemyOutboxStore",
    "SQLAlchemyJobStore",
    "JobSchema",
    "job_schema",
    "OutboxSchema",
    "outbox_schema",
    "create_engine",
    "create_sync_engine",
    "configure_sqlite",
    "is_sqlite",
    "pooler_connect_args",
    "normalize_url",
]
