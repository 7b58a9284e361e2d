"""What the job table and the outbox table share: prefix rules, channel names, creation locks."""

from __future__ import annotations

import hashlib
import re
from typing import Literal

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection

TableKind = Literal["jobs", "outbox"]

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
    digest = hashlib.sha256(f"neverlost-{kind}:{table_name}".encode()).digest()
    key = int.from_bytes(digest[:8], "big", signed=True)
    await conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": key})
