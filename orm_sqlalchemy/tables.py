"""The tables of the SQL stores (the job table, the outbox table) and what they share.

One table of each kind per table prefix, in an optional PostgreSQL ``schema=``; their MetaData
can go under Alembic. Times are epoch milliseconds (BIGINT), so SQLite and PostgreSQL store and
compare them alike. Payloads are JSON *text*, not jsonb: jsonb rejects ``\\u0000``, which a
payload may hold, and text keeps the bytes exactly as enqueued.

Job table. ``due_at`` says when a row may next be claimed: its ``run_at`` while pending, the end
of its lease while active, NULL once finished. One partial index on it serves the whole claim
(due pending jobs and expired leases, oldest first) and the wake-up's "when is the next job
due". A finished row stays until ``expires_at`` (``max(finished_at + retention, keep_until)``):
while it exists its key drops repeats; past it the row reads as gone and is pruned.
``stalls`` counts the leases that expired without a settle, bounded by ``max_stalls``.
The claim walks a second partial index, on (``queue``, ``priority`` descending, ``due_at``): the
claim's one named queue, the highest priority first, then the oldest due; in a priority above
the one it claims from it steps over the entries not yet due (scheduled jobs, live leases) in
the index alone. (It replaced ``ix_<table>_claim``, without the queue, which an upgrade drops.)
``result`` is a completed job's result (the handler's return value, JSON text), written by the
completing statement itself and gone with the row. ``progress`` is the last progress its
handler reported (``[fraction, message]``), written fenced by the lease token.
A workflow's job (``jobs.spi.WorkflowStore``) has ``workflow_id``, its place in the workflow
(``workflow_seq``, listed by a partial index), its parents (``depends_on``, JSON) and how many
of them are unfinished (``waiting``: ``due_at`` is NULL until 0); the ``<prefix>edges`` table
holds a (parent, child) row until the parent settles (``_database.workflows``).
The ``<prefix>limit_claims`` table holds the claims made under a fleet-wide limit
(``jobs.spi.limits``): a row per job and limit key, while its claim holds the job or is within
the rate's window (``_database.limits``); a store made before it serves plain claims without it.

Upgrades: ``create_schema()`` adds a column this version has and the table lacks (``ALTER
TABLE ... ADD COLUMN``: each new column is nullable or has a constant default, which is instant
on SQLite and PostgreSQL), creates missing tables and indexes, and drops the indexes new ones
replace. With ``create_tables=False`` a missing column is a StoreSchemaError naming the
statement to run.

Outbox table. An entry is claimable while ``published_at`` is NULL and ``available_at`` has
passed: ``available_at`` is the creation time, then the lease expiry after a claim, then the
retry time after a release (one column, like a visibility timeout). ``trace_context`` is the
appending caller's W3C traceparent, continued by the relay's publish span. ``run_at`` is when
the job is due, fixed at the append by the database's clock (``delay_ms`` after it, or the
``run_at`` given); NULL: due when published.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any, Literal

from sqlalchemy import (
    BigInteger,
    Column,
    ColumnElement,
    Connection,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    case,
    literal,
    text,
)
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine
from sqlalchemy.schema import CreateColumn, CreateIndex, CreateTable
from sqlalchemy.sql.expression import Grouping

from jobs.errors import StoreSchemaError
from jobs.spi import DEFAULT_MAX_STALLS, DURATION_BOUNDS_MS
from jobs.spi.support import MAX_KEY_LENGTH, MAX_QUEUE_LENGTH, MAX_TYPE_LENGTH

__all__ = [
    "DEFAULT_TABLE_PREFIX",
    "add_column_sql",
    "add_missing_columns",
    "InboxSchema",
    "JobSchema",
    "OutboxSchema",
    "check_columns",
    "check_table_prefix",
    "column_names",
    "create_missing",
    "inbox_schema",
    "job_schema",
    "listed_state",
    "lock_for_creation",
    "lock_for_creation_sync",
    "notify_channel",
    "outbox_schema",
    "set_up_job_table",
    "state_key",
]

TableKind = Literal["jobs", "outbox", "inbox"]

_PREFIX = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,39}")


def check_table_prefix(table_prefix: str) -> str:
    """A prefix safe to put in a table name (it is never quoted text from input)."""
    if not _PREFIX.fullmatch(table_prefix):
        raise ValueError(
            f"table_prefix {table_prefix!r} must be a letter or underscore followed by up to "
            "39 letters, digits or underscores"
        )
    return table_prefix


def notify_channel(kind: TableKind, table_name: str) -> str:
    """The LISTEN/NOTIFY channel of a table: a hash, never the raw (user-supplied) text."""
    digest = hashlib.sha256(table_name.encode("utf-8")).hexdigest()[:24]
    return f"neverlost_{kind}_{digest}"


async def lock_for_creation(conn: AsyncConnection, kind: TableKind, table_name: str) -> None:
    """On PostgreSQL, serialise creating a table across processes (two first users would both
    see no table and collide): a transaction-scoped advisory lock keyed by the table."""
    if conn.dialect.name != "postgresql":
        return
    key = _lock_key(kind, table_name)
    await conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": key})


def lock_for_creation_sync(conn: Connection, kind: TableKind, table_name: str) -> None:
    """``lock_for_creation`` on a sync connection (the app's own, ``append_in``)."""
    if conn.dialect.name != "postgresql":
        return
    conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _lock_key(kind, table_name)})


def _lock_key(kind: TableKind, table_name: str) -> int:
    digest = hashlib.sha256(f"neverlost-{kind}:{table_name}".encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


DEFAULT_TABLE_PREFIX = "jobs_"

LIVE_STATES = ("pending", "active")
LIVE = "live"
"""What the state index keys a pending or an active job by (see ``listed_state``)."""

_OLD_STATE_INDEX = "ix_{name}_state"
_OLD_CLAIM_INDEX = "ix_{name}_claim"
"""The state index of earlier versions, on (state, created_at, id); create_schema drops it."""


def listed_state(jobs: Table) -> ColumnElement[str]:
    """The state index's first column: the state, with pending and active as one value.

    On PostgreSQL every claim and settle writes a new row version and an entry for it in every
    index. Keyed by the plain state, a claim (pending -> active) moved each job to another part
    of the index, which left it bloated with dead entries: 71-79 us of server CPU per job
    drained (claim 10 + complete_many) against 50-55 keyed like this and 46-49 with no state
    index. A claim now writes its entry under the key it had, where PostgreSQL's bottom-up
    deletion clears the old versions. Listing pending jobs reads the live part of the index,
    skipping the active ones (at most the workers' slots and prefetch); listing active jobs
    skips the pending ones newer than them (a backlog is read through once).
    """
    state = jobs.c.state
    return Grouping(case((state.in_(LIVE_STATES), literal(LIVE)), else_=state))


def state_key(state: str) -> str:
    """The value ``listed_state`` has for jobs in ``state`` (the listing's bound ``:listed``)."""
    return LIVE if state in LIVE_STATES else state

@dataclass(frozen=True, slots=True)
class JobSchema:
    """The job table of one prefix, its worker registry table, the MetaData holding them and
    the job table's LISTEN/NOTIFY channel."""

    metadata: MetaData
    jobs: Table
    notify_channel: str
    workers: Table
    audit: Table
    counters: Table
    edges: Table
    paused: Table
    limit_claims: Table

    @property
    def qualified_name(self) -> str:
        """``schema.table`` or ``table``: how messages name the table."""
        return self.jobs.fullname


COUNTER_BUCKETS = len(DURATION_BOUNDS_MS) + 1

LIMIT_KEY_LENGTH = max(MAX_TYPE_LENGTH, MAX_QUEUE_LENGTH) + len("queue:")
"""A limit key: ``type:<job type>`` or ``queue:<queue>`` (``jobs.spi.limits``)."""


def job_schema(
    table_prefix: str = DEFAULT_TABLE_PREFIX,
    metadata: MetaData | None = None,
    *,
    schema: str | None = None,
) -> JobSchema:
    """The job table ``<prefix>queue`` and the live workers' ``<prefix>workers`` in
    ``metadata`` (a new MetaData when None).

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
        Column("key", String(MAX_KEY_LENGTH), nullable=True),
        Column("trace_context", Text, nullable=True),
        Column("keep_until", BigInteger, nullable=True),
        Column("last_error", Text, nullable=True),
        Column("errors", Text, nullable=True),  # JSON [[attempt, at, error], ...], newest last
        Column("created_at", BigInteger, nullable=False),
        Column("finished_at", BigInteger, nullable=True),
        Column("expires_at", BigInteger, nullable=True),
        Column("stalls", Integer, nullable=False, server_default=text("0")),
        Column(
            "max_stalls", Integer, nullable=False, server_default=text(str(DEFAULT_MAX_STALLS))
        ),
        Column("priority", Integer, nullable=False, server_default=text("0")),
        Column(  # the named queue (jobs.options.check_queue)
            "queue", String(MAX_QUEUE_LENGTH), nullable=False, server_default=text("'default'")
        ),
        Column("result", Text, nullable=True),  # the handler's return value, JSON text
        Column("progress", Text, nullable=True),  # the last progress reported, JSON text
        Column("workflow_id", String(64), nullable=True),  # jobs.spi.WorkflowStore
        Column("workflow_seq", Integer, nullable=True),  # its place in the workflow, from 0
        Column("depends_on", Text, nullable=True),  # JSON array of its parents' ids
        Column("waiting", Integer, nullable=True),  # parents still unfinished (due at 0)
        schema=schema,
    )
    claimable = jobs.c.due_at.is_not(None)
    finished = jobs.c.expires_at.is_not(None)
    keyed = jobs.c.key.is_not(None)
    # Partial: a job without a key (most) adds no entry to it, on insert or (PostgreSQL, where
    # every claim and settle writes a new row version) on any later write.
    Index(
        f"ux_{name}_key", jobs.c.key, unique=True, postgresql_where=keyed, sqlite_where=keyed
    )
    Index(f"ix_{name}_due", jobs.c.due_at, postgresql_where=claimable, sqlite_where=claimable)
    Index(  # the claim: one queue, the highest priority first, then the earliest due
        f"ix_{name}_queue_claim",
        jobs.c.queue,
        jobs.c.priority.desc(),
        jobs.c.due_at,
        postgresql_where=claimable,
        sqlite_where=claimable,
    )
    Index(f"ix_{name}_expires", jobs.c.expires_at, postgresql_where=finished, sqlite_where=finished)
    Index(f"ix_{name}_created", jobs.c.created_at, jobs.c.id)  # list_jobs, newest first
    Index(f"ix_{name}_by_state", listed_state(jobs), jobs.c.created_at, jobs.c.id)  # one state
    in_workflow = jobs.c.workflow_id.is_not(None)
    Index(  # workflow_jobs, in the order they were stored; no entry for a plain job
        f"ix_{name}_workflow",
        jobs.c.workflow_id,
        jobs.c.workflow_seq,
        postgresql_where=in_workflow,
        sqlite_where=in_workflow,
    )
    edges = Table(  # a workflow's dependencies still to settle: one row per (parent, child)
        f"{table_prefix}edges",
        metadata,
        Column("parent_id", String(255), primary_key=True),
        Column("child_id", String(255), primary_key=True),
        Column("proceed", Integer, nullable=False),  # 1: on_failure="continue"
        schema=schema,
    )
    workers = Table(
        f"{table_prefix}workers",
        metadata,
        Column("id", String(255), primary_key=True),
        Column("host", Text, nullable=False),
        Column("pid", Integer, nullable=False),
        Column("types", Text, nullable=False),  # JSON array of job types
        Column("concurrency", Integer, nullable=False),
        Column("in_flight", Integer, nullable=False),
        Column("started_at", BigInteger, nullable=False),
        Column("last_seen", BigInteger, nullable=False),
        Column("expires_at", BigInteger, nullable=False),
        Column("queues", Text, nullable=True),  # JSON array of the queues it claims from
        schema=schema,
    )
    Index(f"ix_{table_prefix}workers_expires", workers.c.expires_at)
    audit = Table(  # the operators' actions (jobs.spi.AuditTrail), bounded by the store
        f"{table_prefix}audit",
        metadata,
        Column("id", String(64), primary_key=True),
        Column("at", BigInteger, nullable=False),
        Column("action", String(64), nullable=False),
        Column("target", Text, nullable=False),
        Column("actor", Text, nullable=False),
        Column("source", String(32), nullable=False),
        Column("count", BigInteger, nullable=False),
        schema=schema,
    )
    Index(f"ix_{table_prefix}audit_at", audit.c.at, audit.c.id)
    counters = Table(  # per-minute outcome counts (jobs.spi.OutcomeCounters), kept 7 days
        f"{table_prefix}counters",
        metadata,
        Column("minute", BigInteger, primary_key=True),
        Column("type", String(MAX_TYPE_LENGTH), primary_key=True),
        Column("outcome", String(16), primary_key=True),
        Column("count", BigInteger, nullable=False),
        Column("duration_ms", BigInteger, nullable=False),
        *(Column(f"b{index}", BigInteger, nullable=False) for index in range(COUNTER_BUCKETS)),
        schema=schema,
    )
    paused = Table(  # the paused named queues (jobs.spi.QueuePauses): a row per paused queue
        f"{table_prefix}paused_queues",
        metadata,
        Column("queue", String(MAX_QUEUE_LENGTH), primary_key=True),
        Column("paused_at", BigInteger, nullable=False),
        schema=schema,
    )
    limit_claims = Table(  # the claims made under a fleet-wide limit (_database.limits)
        f"{table_prefix}limit_claims",
        metadata,
        Column("key", String(LIMIT_KEY_LENGTH), primary_key=True),  # type:<name>, queue:<name>
        Column("job_id", String(255), primary_key=True),
        Column("lease_token", String(64), primary_key=True),  # held while the job holds it
        Column("at", BigInteger, nullable=False),  # when claimed: the rate window counts it
        # 1 until a claim finds the job no longer holds the lease (never again: a lease token
        # is its claim's alone), so the count joins only these rows with the job table
        Column("held", Integer, nullable=False, server_default=text("1")),
        schema=schema,
    )
    Index(f"ix_{limit_claims.name}_window", limit_claims.c.key, limit_claims.c.at)
    Index(f"ix_{limit_claims.name}_held", limit_claims.c.key, limit_claims.c.held)
    return JobSchema(
        metadata,
        jobs,
        notify_channel("jobs", jobs.fullname),
        workers,
        audit,
        counters,
        edges,
        paused,
        limit_claims,
    )


def check_columns(
    table: Table,
    found: Collection[str] | None,
    *,
    store: str = "job store",
    connection: Connection | None = None,
) -> None:
    """StoreSchemaError unless the live table (``found``: its column names) has every column.

    The error names the ``ALTER TABLE`` that adds the first missing one (spelled for
    ``connection``'s database when given).
    """
    if found is None:
        raise StoreSchemaError(
            f"table {table.fullname!r} does not exist; create it with "
            "`await store.create_schema()` or put the store's metadata under your migrations"
        )
    present = set(found)
    for column in table.columns:
        if column.name not in present:
            fix = "migrate it (the store's `metadata` has the expected shape)"
            if _addable(column):
                fix = (
                    f"add it with `{add_column_sql(connection, table, column)}` or "
                    '`await store.create_schema()` (see the docs\' "Upgrade the tables")'
                )
            raise StoreSchemaError(
                f"table {table.fullname!r} has no column {column.name!r}: it was made for "
                f"another version of the {store}; {fix}"
            )


def _addable(column: Column[Any]) -> bool:
    """Whether ``ALTER TABLE ... ADD COLUMN`` adds it in place (instantly on SQLite and
    PostgreSQL): nullable, or with a constant server default."""
    return column.nullable is True or column.server_default is not None


def add_column_sql(connection: Connection | None, table: Table, column: Column[Any]) -> str:
    """The ``ALTER TABLE ... ADD COLUMN`` that adds ``column`` to ``table``."""
    if connection is None:
        spec = f"{column.name} {column.type}"
        default = column.server_default
        if default is not None:
            spec += f" NOT NULL DEFAULT {default.arg.text}"  # type: ignore[attr-defined]
        return f"ALTER TABLE {table.fullname} ADD COLUMN {spec}"
    dialect = connection.dialect
    spec = str(CreateColumn(column).compile(dialect=dialect))
    return f"ALTER TABLE {dialect.identifier_preparer.format_table(table)} ADD COLUMN {spec}"


def add_missing_columns(connection: Connection, table: Table, found: Collection[str]) -> list[str]:
    """Add each column of ``table`` that the live table (``found``: its columns) lacks and
    that can be added in place (``_addable``); the names added. The one way every store table
    takes the columns a later version gives it; ``check_columns`` refuses what is left."""
    present = set(found)
    added = []
    for column in table.columns:
        if column.name not in present and _addable(column):
            connection.execute(text(add_column_sql(connection, table, column)))
            added.append(column.name)
    return added


async def set_up_job_table(engine: AsyncEngine, schema: JobSchema, *, create: bool) -> None:
    """Create the job and worker tables and their indexes unless they exist (``create``), then
    check their columns.

    A table of an older version gets the columns this one added (``add_missing_columns``);
    one that lacks a column that cannot be added in place is refused. Given its columns, a
    missing table or index is created, so a job table made before the worker registry, the
    listing indexes or the partial key index is brought up to date (an index is built while
    writes to the table wait; on PostgreSQL the full UNIQUE (key) constraint it replaces is
    dropped).

    Race-safe across processes: on PostgreSQL under a transaction-scoped advisory lock keyed
    by the table name, in READ COMMITTED so that a table made by whoever held the lock before
    is seen; on SQLite inside a write transaction (the engine begins them IMMEDIATE).
    """
    postgres = engine.dialect.name == "postgresql"
    tables = (
        schema.jobs, schema.workers, schema.audit, schema.counters, schema.edges, schema.paused,
        schema.limit_claims,
    )  # fmt: skip
    later = (schema.audit, schema.counters, schema.paused, schema.limit_claims)

    def work(connection: Connection) -> None:
        found: dict[Table, list[str] | None] = {}
        for table in tables:
            columns = found[table] = column_names(connection, table)
            if columns is not None and create:
                columns.extend(add_missing_columns(connection, table, columns))
            if columns is None and not create and any(table is t for t in later):
                continue  # a store made before the audit trail: read-only looks still work
            if columns is not None or not create:
                check_columns(table, columns, connection=connection)
        if not create:
            return
        indexes = create_missing(connection, found)
        jobs = schema.jobs
        if found[jobs] is not None:
            for old in (_OLD_STATE_INDEX, _OLD_CLAIM_INDEX):
                if old.format(name=jobs.name) in indexes[jobs]:
                    _drop_index(connection, jobs, old)
            if postgres:
                _drop_full_key_constraint(connection, jobs)

    async with engine.connect() as connection:
        if postgres:
            connection = await connection.execution_options(isolation_level="READ COMMITTED")
        async with connection.begin():
            await lock_for_creation(connection, "jobs", schema.qualified_name)
            await connection.run_sync(work)


def create_missing(
    connection: Connection, found: dict[Table, list[str] | None]
) -> dict[Table, set[str]]:
    """Create the tables (``found``: their live columns, None if absent) and indexes that do
    not exist; the names of each table's indexes as they were.

    Only what is missing: even CREATE INDEX IF NOT EXISTS takes the table's SHARE lock before
    it finds the index there, so a worker starting would wait behind any open write
    transaction on the table and hold every enqueue behind it meanwhile (seen: a worker whose
    loop was blocked inside its registration stalled the next worker's start for as long).
    One catalog query per existing table names its indexes.
    """
    indexes: dict[Table, set[str]] = {}
    for table, columns in found.items():
        if columns is None:
            connection.execute(CreateTable(table))
            indexes[table] = set()
        else:
            indexes[table] = _index_names(connection, table)
        for index in table.indexes:
            if index.name not in indexes[table]:
                connection.execute(CreateIndex(index, if_not_exists=True))
    return indexes


def column_names(connection: Connection, table: Table) -> list[str] | None:
    """The names of ``table``'s columns, from the catalog; None if it does not exist.

    Not SQLAlchemy's reflection: its PostgreSQL dialect keeps the catalog queries it builds in
    class-level LRU caches keyed by the dialect instance, so every engine that set up a store
    left ~150 KB of statements there until the caches filled (measured: RSS +40 MB over 200
    engines made, used and disposed in one process, flat after that; tests/soak).
    """
    if connection.dialect.name == "postgresql":
        query = text(
            "SELECT column_name FROM information_schema.columns "
            "WHERE table_schema = coalesce(:schema, current_schema()) AND table_name = :table "
            "ORDER BY ordinal_position"
        )
        rows = connection.execute(query, {"schema": table.schema, "table": table.name})
    else:
        query = text("SELECT name FROM pragma_table_info(:table, :schema) ORDER BY cid")
        rows = connection.execute(query, {"table": table.name, "schema": table.schema or "main"})
    names = [str(name) for (name,) in rows]
    return names or None


def _index_names(connection: Connection, table: Table) -> set[str]:
    """The names of ``table``'s indexes, from the catalog (SQLAlchemy's reflection skips
    expression indexes such as ``ix_<table>_by_state``, with a warning)."""
    if connection.dialect.name == "postgresql":
        query = text(
            "SELECT indexname FROM pg_indexes "
            "WHERE schemaname = coalesce(:schema, current_schema()) AND tablename = :table"
        )
        rows = connection.execute(query, {"schema": table.schema, "table": table.name})
    else:
        master = "sqlite_master" if table.schema is None else f'"{table.schema}".sqlite_master'
        query = text(f"SELECT name FROM {master} WHERE type = 'index' AND tbl_name = :table")
        rows = connection.execute(query, {"table": table.name})
    return {str(name) for (name,) in rows}


def _drop_index(connection: Connection, jobs: Table, old: str) -> None:
    """Drop an earlier version's index whose successor exists (the state index, replaced by
    ``ix_<table>_by_state``; the claim index without the queue, by ``ix_<table>_queue_claim``)."""
    preparer = connection.dialect.identifier_preparer
    name = preparer.quote(old.format(name=jobs.name))
    if jobs.schema is not None:
        name = f"{preparer.quote_schema(jobs.schema)}.{name}"
    connection.execute(text(f"DROP INDEX IF EXISTS {name}"))


def _drop_full_key_constraint(connection: Connection, jobs: Table) -> None:
    """Drop the UNIQUE (key) constraint of a job table made before the partial key index.

    The partial index enforces the same rule (keys are unique; NULLs never collide), and the
    enqueues' ``ON CONFLICT (key) WHERE key IS NOT NULL`` infers either; but the constraint
    would still take an entry for every row version. Called once the partial index exists.
    On SQLite an inline UNIQUE constraint cannot be dropped without rebuilding the table, so
    an old SQLite table keeps it (correct, a little slower to write).
    """
    preparer = connection.dialect.identifier_preparer
    table = preparer.format_table(jobs)
    unique_on_key = text(
        "SELECT c.conname FROM pg_constraint c "
        "JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = ANY(c.conkey) "
        "WHERE c.conrelid = CAST(:table AS regclass) AND c.contype = 'u' "
        "GROUP BY c.conname HAVING array_agg(a.attname::text) = ARRAY['key']"
    )
    for (name,) in connection.execute(unique_on_key, {"table": table}).all():
        connection.execute(text(f"ALTER TABLE {table} DROP CONSTRAINT {preparer.quote(name)}"))


@dataclass(frozen=True, slots=True)
class OutboxSchema:
    """The outbox table of one prefix, the live relays' table, the MetaData holding them and
    the entries' LISTEN/NOTIFY channel."""

    metadata: MetaData
    entries: Table
    notify_channel: str
    relays: Table


def outbox_schema(
    table_prefix: str = "outbox_",
    metadata: MetaData | None = None,
    *,
    schema: str | None = None,
) -> OutboxSchema:
    """The outbox table ``<prefix>entries`` and the live relays' ``<prefix>relays`` in
    ``metadata`` (a new MetaData when None).

    If ``metadata`` already holds those tables (another store made them), they are reused.
    """
    metadata = metadata if metadata is not None else MetaData()
    name = f"{check_table_prefix(table_prefix)}entries"
    qualified = name if schema is None else f"{schema}.{name}"
    relays = _relays_table(metadata, f"{table_prefix}relays", schema)
    existing = metadata.tables.get(qualified)
    if existing is not None:  # a second store on a shared MetaData
        return OutboxSchema(metadata, existing, notify_channel("outbox", qualified), relays)
    entries = Table(
        name,
        metadata,
        Column("id", String(36), primary_key=True),
        Column("type", String(MAX_TYPE_LENGTH), nullable=False),
        Column("payload", Text, nullable=False),
        Column("key", String(MAX_KEY_LENGTH), nullable=True),
        Column("delay_ms", BigInteger, nullable=True),
        Column("created_at", BigInteger, nullable=False),
        Column("available_at", BigInteger, nullable=False),
        Column("attempts", Integer, nullable=False, default=0),
        Column("lease_token", String(64), nullable=True),
        Column("published_at", BigInteger, nullable=True),
        Column("last_error", Text, nullable=True),
        Column("trace_context", Text, nullable=True),
        Column("run_at", BigInteger, nullable=True),  # when the job is due (epoch ms)
        Column("max_attempts", Integer, nullable=True),
        Column("priority", Integer, nullable=True),  # None: the handler's, else 0
        Column("queue", String(MAX_QUEUE_LENGTH), nullable=True),  # None: likewise, "default"
        schema=schema,
    )
    unpublished = entries.c.published_at.is_(None)
    published = entries.c.published_at.is_not(None)
    Index(
        f"ix_{name}_claim",
        entries.c.available_at,
        entries.c.id,
        postgresql_where=unpublished,
        sqlite_where=unpublished,
    )
    Index(
        f"ix_{name}_published",
        entries.c.published_at,
        postgresql_where=published,
        sqlite_where=published,
    )
    keyed = entries.c.key.is_not(None)
    Index(  # an append whose key is present is dropped (INSERT ... ON CONFLICT DO NOTHING)
        f"ux_{name}_key",
        entries.c.key,
        unique=True,
        postgresql_where=keyed,
        sqlite_where=keyed,
    )
    return OutboxSchema(metadata, entries, notify_channel("outbox", qualified), relays)


def _relays_table(metadata: MetaData, name: str, schema: str | None) -> Table:
    """The live relays of an outbox (``register_relay``): one row each, until ``expires_at``."""
    existing = metadata.tables.get(name if schema is None else f"{schema}.{name}")
    if existing is not None:
        return existing
    relays = Table(
        name,
        metadata,
        Column("id", String(255), primary_key=True),
        Column("host", String(255), nullable=False),
        Column("pid", Integer, nullable=False),
        Column("started_at", BigInteger, nullable=False),
        Column("last_seen", BigInteger, nullable=False),
        Column("expires_at", BigInteger, nullable=False),
        schema=schema,
    )
    Index(f"ix_{name}_expires", relays.c.expires_at)
    return relays


@dataclass(frozen=True)
class InboxSchema:
    """The inbox table of one prefix (``SQLAlchemyInbox``) and the MetaData holding it."""

    metadata: MetaData
    processed: Table


INBOX_IDENTITY_LENGTH = MAX_KEY_LENGTH + 4
"""``key:<job key>`` or ``id:<job id>``."""


def inbox_schema(
    table_prefix: str = "neverlost_",
    metadata: MetaData | None = None,
    *,
    schema: str | None = None,
) -> InboxSchema:
    """The inbox table ``<prefix>inbox`` in ``metadata`` (a new MetaData when None): one row
    per job whose effects committed, keyed by the job's identity (its key when it has one,
    else its id), kept until ``processed_at`` + the inbox's retention.

    If ``metadata`` already holds that table (another inbox made it), it is reused.
    """
    metadata = metadata if metadata is not None else MetaData()
    name = f"{check_table_prefix(table_prefix)}inbox"
    qualified = name if schema is None else f"{schema}.{name}"
    existing = metadata.tables.get(qualified)
    if existing is not None:
        return InboxSchema(metadata, existing)
    processed = Table(
        name,
        metadata,
        Column("identity", String(INBOX_IDENTITY_LENGTH), primary_key=True),
        Column("job_id", String(64), nullable=False),
        Column("job_type", String(MAX_TYPE_LENGTH), nullable=False),
        Column("attempt", Integer, nullable=False),
        Column("processed_at", BigInteger, nullable=False),
        schema=schema,
    )
    Index(f"ix_{name}_processed_at", processed.c.processed_at)
    return InboxSchema(metadata, processed)
