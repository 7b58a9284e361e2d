"""The job table, one per table prefix; its MetaData can go under Alembic.

Times are epoch milliseconds (BIGINT), so SQLite and PostgreSQL store and compare them alike.
``due_at`` says when a row may next be claimed: its ``run_at`` while pending, the end of its
lease while active, NULL once finished. One partial index on it serves the whole claim (due
pending jobs and expired leases, oldest first) and the wake-up's "when is the next job due".
A finished row stays until ``expires_at`` (``max(finished_at + retention, keep_until)``): while
it exists its key drops repeats; past it the row reads as gone and is pruned.

The payload is JSON *text*, not jsonb: jsonb rejects ``\\u0000``, which a payload may hold, and
text keeps the bytes exactly as enqueued.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from sqlalchemy import (
    BigInteger,
    Column,
    Connection,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    inspect,
)
from sqlalchemy.ext.asyncio import AsyncEngine

from jobs.errors import StoreSchemaError
from jobs.payload import MAX_KEY_LENGTH, MAX_TYPE_LENGTH

from .tables import check_table_prefix, lock_for_creation, notify_channel

__all__ = ["DEFAULT_TABLE_PREFIX", "JobSchema", "check_columns", "job_schema", "set_up_job_table"]

DEFAULT_TABLE_PREFIX = "jobs_"

@dataclass(frozen=True, slots=True)
class JobSchema:
    """The job table of one prefix, the MetaData holding it and its LISTEN/NOTIFY channel."""

    metadata: MetaData
    jobs: Table
    notify_channel: str

    @property
    def qualified_name(self) -> str:
        """``schema.table`` or ``table``: how messages name the table."""
        return self.jobs.fullname


def job_schema(
    table_prefix: str = DEFAULT_TABLE_PREFIX,
    metadata: MetaData | None = None,
    *,
    schema: str | None = None,
) -> JobSchema:
    """The job table ``<prefix>queue`` in ``metadata`` (a new MetaData when None).

    Pass your application's MetaData to have Alembic autogenerate the table with the rest.
    """
    metadata = metadata if metadata is not None else MetaData()
    name = f"{check_table_prefix(table_prefix)}queue"
    jobs = Table(
        name,
        metadata,
        Column("id", String(255), primary_key=True),
        Column("type", String(MAX_TYPE_LENGTH), nullable=False),
        Column("payload", Text, nullable=False),
        Column("state", String(16), nullable=False),
        Column("attempts", Integer, nullable=False),
        Column("max_attempts", Integer, nullable=False),
        Column("run_at", BigInteger, nullable=False),
        Column("due_at", BigInteger, nullable=True),
        Column("lease_token", String(64), nullable=True),
        Column("timeout_ms", BigInteger, nullable=True),
        Column("key", String(MAX_KEY_LENGTH), nullable=True, unique=True),
        Column("trace_context", Text, nullable=True),
        Column("keep_until", BigInteger, nullable=True),
        Column("last_error", Text, nullable=True),
        Column("created_at", BigInteger, nullable=False),
        Column("finished_at", BigInteger, nullable=True),
        Column("expires_at", BigInteger, nullable=True),
        schema=schema,
    )
    claimable = jobs.c.due_at.is_not(None)
    finished = jobs.c.expires_at.is_not(None)
    Index(f"ix_{name}_due", jobs.c.due_at, postgresql_where=claimable, sqlite_where=claimable)
    Index(f"ix_{name}_expires", jobs.c.expires_at, postgresql_where=finished, sqlite_where=finished)
    return JobSchema(metadata, jobs, notify_channel("jobs", jobs.fullname))


def check_columns(table: Table, found: Collection[str] | None) -> None:
    """StoreSchemaError unless the live table (``found``: its column names) has every column."""
    if found is None:
        raise StoreSchemaError(
            f"table {table.fullname!r} does not exist; create it with "
            "`await store.create_schema()` or put the store's metadata under your migrations"
        )
    present = set(found)
    for column in table.columns:
        if column.name not in present:
            raise StoreSchemaError(
                f"table {table.fullname!r} has no column {column.name!r}: it was made for "
                "another version of the job store; migrate it (the store's `metadata` has "
                "the expected shape)"
            )


async def set_up_job_table(engine: AsyncEngine, schema: JobSchema, *, create: bool) -> None:
    """Create the job table unless it exists (``create``), then check its columns.

    Race-safe across processes: on PostgreSQL under a transaction-scoped advisory lock keyed
    by the table name, in READ COMMITTED so that a table made by whoever held the lock before
    is seen; on SQLite inside a write transaction (the engine begins them IMMEDIATE).
    """
    postgres = engine.dialect.name == "postgresql"

    def work(connection: Connection) -> None:
        if create:
            schema.jobs.create(connection, checkfirst=True)
        inspector = inspect(connection)
        table = schema.jobs
        found = None
        if inspector.has_table(table.name, schema=table.schema):
            found = [column["name"] for column in inspector.get_columns(table.name, table.schema)]
        check_columns(table, found)

    async with engine.connect() as connection:
        if postgres:
            connection = await connection.execution_options(isolation_level="READ COMMITTED")
        async with connection.begin():
            await lock_for_creation(connection, "jobs", schema.qualified_name)
            await connection.run_sync(work)
