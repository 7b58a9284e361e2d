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
from .inbox import SQLAlchemyInbox
from .outbox import SQLAlchemyOutboxStore
from .store import SQLAlchemyJobStore
from .tables import InboxSchema, JobSchema, OutboxSchema, inbox_schema, job_schema, outbox_schema
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
    "SQLAlchemyInbox",
    "InboxSchema",
    "inbox_schema",
    "create_engine",
    "create_sync_engine",
    "configure_sqlite",
    "is_sqlite",
    "pooler_connect_args",
    "normalize_url",
]
