"""The outbox table, one per table prefix; its MetaData can go under Alembic.

Times are epoch milliseconds (BIGINT) so SQLite and PostgreSQL store and compare them alike.
An entry is claimable while ``published_at`` is NULL and ``available_at`` has passed:
``available_at`` is the creation time, then the lease expiry after a claim, then the retry
time after a release (one column, like a visibility timeout). The payload is JSON *text*,
not jsonb: jsonb rejects ``\\u0000``, which a payload may hold. ``trace_context`` is the
appending caller's W3C traceparent, continued by the relay's publish span.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import BigInteger, Column, Index, Integer, MetaData, String, Table, Text

from jobs.payload import MAX_KEY_LENGTH, MAX_TYPE_LENGTH

from .tables import check_table_prefix, notify_channel


@dataclass(frozen=True, slots=True)
class OutboxSchema:
    metadata: MetaData
    entries: Table
    notify_channel: str


def outbox_schema(table_prefix: str = "outbox_", metadata: MetaData | None = None) -> OutboxSchema:
    """The outbox table ``<prefix>entries`` in ``metadata`` (a new MetaData when None).

    If ``metadata`` already holds that table (another store made it), it is reused.
    """
    metadata = metadata if metadata is not None else MetaData()
    name = f"{check_table_prefix(table_prefix)}entries"
    existing = metadata.tables.get(name)
    if existing is not None:  # a second store on a shared MetaData
        return OutboxSchema(metadata, existing, notify_channel("outbox", name))
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
    return OutboxSchema(metadata, entries, notify_channel("outbox", name))

