"""The outbox SPI: entries written in the caller's transaction, handed over by a relay.

An ``OutboxStore`` appends entries through the transaction that is open in the caller's
context, so an entry lives or dies with the business change. A relay (``jobs.OutboxRelay``)
claims unpublished entries with a lease, hands each to an ``OutboxPublisher``, and marks it
published: at least once. ``jobs.JobOutboxPublisher`` turns an entry into a job keyed by the
entry, so a second hand-over of the same entry is dropped by the queue.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, overload, runtime_checkable

from pydantic import BaseModel

from .records import (
    OutboxEntry,
    OutboxEntryInfo,
    OutboxEntryPage,
    OutboxStats,
    RelayInfo,
    RelayRegistration,
)

if TYPE_CHECKING:
    from ..definitions import JobDefinition

__all__ = ["OutboxStore", "OutboxPublisher", "OutboxOperations"]

M = TypeVar("M", bound=BaseModel)


@runtime_checkable
class OutboxStore(Protocol):
    """Where outbox entries wait for the relay."""

    @overload
    async def append(
        self,
        type: JobDefinition[M],
        payload: M | Mapping[str, Any],
        *,
        key: str | None = None,
        delay_ms: int | None = None,
        run_at: datetime | None = None,
        max_attempts: int | None = None,
        priority: int | None = None,
        queue: str | None = None,
    ) -> str | None: ...

    @overload
    async def append(
        self,
        type: str,
        payload: Any = None,
        *,
        key: str | None = None,
        delay_ms: int | None = None,
        run_at: datetime | None = None,
        max_attempts: int | None = None,
        priority: int | None = None,
        queue: str | None = None,
    ) -> str | None: ...

    async def append(
        self,
        type: str | JobDefinition[Any],
        payload: Any = None,
        *,
        key: str | None = None,
        delay_ms: int | None = None,
        run_at: datetime | None = None,
        max_attempts: int | None = None,
        priority: int | None = None,
        queue: str | None = None,
    ) -> str | None:
        """Write an entry through the open transaction, with the caller's trace context
        (``jobs.spi.support.current_traceparent``); its id, or None when an entry with ``key`` is
        already there. A definition's model validates ``payload`` before anything is written.
        No transaction: an error.

        The options are checked as the queue checks them (``jobs.spi.support.check_delay_ms``,
        ``check_run_at``, ``check_max_attempts``; ``JobOptionError``). The entry stores when
        the job is due as an absolute time: ``delay_ms`` after the append by the store's clock,
        or ``run_at`` (``OutboxEntry.run_at_ms``), so the job is due then however late the
        relay publishes it; ``max_attempts``, ``priority`` and ``queue`` are carried to the job.
        """
        ...

    async def claim(self, limit: int, lease_ms: int) -> list[OutboxEntry]:
        """Lease up to ``limit`` unpublished entries (own transaction), oldest first."""
        ...

    async def mark_published(self, entry_id: str, lease_token: str) -> bool:
        """Mark the entry published; False (no write) if the lease token is stale."""
        ...

    async def mark_published_many(self, entries: Sequence[OutboxEntry]) -> list[str]:
        """Mark claimed entries published in one statement; the ids marked, in any order.

        An entry whose ``lease_token`` no longer holds it is left as it is (not in the result).
        """
        ...

    async def release(self, entry_id: str, lease_token: str, *, delay_ms: int, error: str) -> bool:
        """A failed publish: claimable again after ``delay_ms``; False if stale."""
        ...

    async def prune(self, older_than_ms: int) -> int:
        """Delete entries published more than ``older_than_ms`` ago, at most a batch of the
        store's choosing per call (one short statement); how many, 0 when none is left. The
        relay calls it again while it deletes."""
        ...

    async def wait_for_entries(self, timeout_ms: int) -> None:
        """Return after a commit that appended (or ``timeout_ms``); may return early."""
        ...

    async def close(self) -> None:
        """Release what the store owns. Idempotent."""
        ...


@runtime_checkable
class OutboxOperations(Protocol):
    """What operators read and do on an outbox store (optional: ``neverlost stats``, ``neverlost
    outbox``, the dashboard's Outbox page and relay presence use it when the store has it).

    Relays register their presence like runners do (``WorkerRegistry``): a record that lives
    ``ttl_ms`` after its last refresh, so a dead relay drops out of ``list_relays()`` by itself.
    """

    async def outbox_stats(self) -> OutboxStats:
        """Counts over unpublished entries (index-backed) and entries published in the last
        hour."""
        ...

    async def register_relay(self, relay: RelayRegistration, ttl_ms: int) -> None:
        """Record or refresh a live relay until ``ttl_ms`` from now (its ``started_at`` kept
        while the record lives)."""
        ...

    async def deregister_relay(self, relay_id: str) -> None:
        """Forget a relay (a clean stop); unknown ids are ignored."""
        ...

    async def list_relays(self) -> list[RelayInfo]:
        """The live relays, by start time."""
        ...

    async def list_entries(
        self,
        *,
        state: str | None = None,
        type: str | None = None,
        limit: int = 50,
        cursor: str | None = None,
    ) -> OutboxEntryPage:
        """Entries oldest first, filtered by ``state`` (``OUTBOX_ENTRY_STATES``; None: any) and
        ``type``; ``cursor`` from the previous page's ``next_cursor``."""
        ...

    async def get_entry(self, entry_id: str) -> OutboxEntryInfo | None:
        """One entry, or None."""
        ...

    async def retry_entry(self, entry_id: str) -> bool:
        """Make an unpublished entry claimable now (its retry delay or lease dropped); False,
        writing nothing, if it is published or gone. A relay holding it may still publish it:
        the job's key drops a second hand-over."""
        ...


class OutboxPublisher(Protocol):
    """Anything that can take an entry somewhere (a job queue, a broker).

    A publisher may also have ``async publish_many(entries)``, taking a claimed batch at once
    (all or nothing: it raises if any entry could not be taken); the relay then uses it.
    """

    async def publish(self, entry: OutboxEntry) -> None: ...
