"""The outbox as ``neverlost stats`` shows it: waiting entries, their age, failed hand-overs,
what was published in the last hour, and the live relays; NO RELAY when entries wait and no
relay is alive (as NO WORKER says of due jobs).

Read from the APP's outbox store (bean ``outbox_store``) when it has ``OutboxOperations``;
a ``--url`` target, or an APP without an outbox, has no outbox view (``None``).
"""

from __future__ import annotations

from typing import Any

from ..spi.outbox import OutboxOperations, OutboxStore
from .durations import format_ms
from .hints import settle_all


def outbox_operations(store: OutboxStore | None) -> OutboxOperations | None:
    """The store, when it has the operators' part of the outbox SPI."""
    return store if isinstance(store, OutboxOperations) else None


async def outbox_view(store: OutboxStore | None) -> dict[str, Any] | None:
    """``{unpublished, oldest_age_ms, with_errors, published_last_hour, relays, no_relay}``, or
    None without an outbox store that has ``OutboxOperations``."""
    operations = outbox_operations(store)
    if operations is None:
        return None
    stats, relays = await settle_all(operations.outbox_stats(), operations.list_relays())
    return {
        "unpublished": stats.unpublished,
        "oldest_age_ms": stats.oldest_age_ms,
        "with_errors": stats.with_errors,
        "published_last_hour": stats.published_last_hour,
        "relays": len(relays),
        "no_relay": stats.unpublished > 0 and not relays,
    }


def outbox_line(view: dict[str, Any]) -> str:
    """One line for people: ``outbox: 3 unpublished (oldest 2m), 1 with errors, 40 published
    in the last hour, 0 live relay(s): NO RELAY``."""
    waiting = f"{view['unpublished']} unpublished"
    if view["oldest_age_ms"] is not None:
        waiting += f" (oldest {format_ms(view['oldest_age_ms'])})"
    parts = [
        waiting,
        f"{view['with_errors']} with errors",
        f"{view['published_last_hour']} published in the last hour",
        f"{view['relays']} live relay(s)",
    ]
    line = "outbox: " + ", ".join(parts)
    if view["no_relay"]:
        line += ": NO RELAY (entries wait and no relay is alive; start `neverlost worker APP`)"
    return line
