"""The outbox at a glance, for operators (``neverlost stats``, the dashboard's overview):
unpublished entries, the oldest one's age, failed hand-overs, what was published in the last
hour, the live relays; ``no_relay`` when entries wait and no relay is alive (as NO WORKER says
of due jobs). Read from an outbox store that has ``jobs.spi.OutboxOperations``."""

from __future__ import annotations

import asyncio
from typing import Any

from .spi.outbox import OutboxOperations

__all__ = ["outbox_operations", "outbox_status"]


def outbox_operations(store: object) -> OutboxOperations | None:
    """The store, when it has the operators' part of the outbox SPI."""
    return store if isinstance(store, OutboxOperations) else None


async def outbox_status(store: object) -> dict[str, Any] | None:
    """``{unpublished, oldest_age_ms, with_errors, published_last_hour, relays, no_relay}``, or
    None without an outbox store that has ``OutboxOperations``. Both reads run to their end
    before an error of either is raised (nothing left running)."""
    operations = outbox_operations(store)
    if operations is None:
        return None
    stats, relays = await asyncio.gather(
        operations.outbox_stats(), operations.list_relays(), return_exceptions=True
    )
    if isinstance(stats, BaseException):
        raise stats
    if isinstance(relays, BaseException):
        raise relays
    return {
        "unpublished": stats.unpublished,
        "oldest_age_ms": stats.oldest_age_ms,
        "with_errors": stats.with_errors,
        "published_last_hour": stats.published_last_hour,
        "relays": len(relays),
        "no_relay": stats.unpublished > 0 and not relays,
    }
