"""The outbox as ``neverlost stats`` shows it: waiting entries, their age, failed hand-overs,
what was published in the last hour, and the live relays; NO RELAY when entries wait and no
relay is alive (as NO WORKER says of due jobs).

Read from the APP's outbox store (bean ``outbox_store``) when it has ``OutboxOperations``;
a ``--url`` target, or an APP without an outbox, has no outbox view (``None``).
"""

from __future__ import annotations

from typing import Any

from ..outbox_status import outbox_operations, outbox_status
from .durations import format_ms
from .errors import StoreError
from .running import STORE_FAILURES, describe_failure

__all__ = ["outbox_line", "outbox_operations", "outbox_view"]


async def outbox_view(store: object) -> dict[str, Any] | None:
    """The view ``stats`` shows (``jobs.outbox_status``); a failure of the outbox store is one
    line naming it (not the job store)."""
    try:
        return await outbox_status(store)
    except STORE_FAILURES as exc:
        raise StoreError(f"outbox store {store!r} failed: {describe_failure(exc)}") from None


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
        line += ": NO RELAY (no relay is alive: start `neverlost worker APP`)"
    return line
