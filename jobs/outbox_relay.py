"""OutboxRelay: hands committed outbox entries to a publisher, at least once; and
``JobOutboxPublisher``, the publisher that turns an entry into a job.

Claims a batch of unpublished entries with a lease, publishes it, marks it published. With a
publisher that has ``publish_many`` (``JobOutboxPublisher``: one ``enqueue_many``), a batch is
one publish call and one ``mark_published_many`` statement; if the batch publish fails, its
entries are published one by one, so one bad entry holds up only itself. A publish that fails
puts the entry back after a backoff; a relay that dies leaves its entries to their lease.

While a full batch is being handed over, the next claim is already in flight: claimed entries
are leased, so the next claim takes the entries after them (fencing holds), and batches are
handed over in the order they were claimed. Likewise a published batch is marked while the
loop claims the next one (one mark in flight at a time): a mark that fails is logged and its
entries, still leased, are handed over again after their lease (the job key drops the repeat).
Woken right after a commit that appended (the store's ``wait_for_entries``), polling as the
fallback. Lifecycle phase 20, started like the
runner. The loop runs under a ``Supervisor`` (restarted after anything unexpected escapes it);
``health()`` says whether the store answered within three poll intervals and the loop is alive.
The first claim checks the store: if it cannot be reached, one line says so, naming it.
A relay registers its presence in the store (``jobs.relay_presence``, every
``presence_interval_ms``), so ``neverlost stats`` can say NO RELAY when entries wait and none
is alive.

With ``retain_published_ms`` (``JobsSettings.retain_published_ms``, 7 days, wired by the
autoconfiguration) a second supervised loop deletes entries published longer ago than that,
at start and then every ``prune_interval_ms``, beside the relaying (a large backlog of history
does not hold up publishing); a failed prune is logged and tried again at the next interval.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

from loguru import logger

from .clock import to_datetime
from .failures import FailureStreak
from .metrics import record_published, record_published_batch, watch_outbox
from .new_job import NewJob
from .outbox_workflows import publish_workflow
from .queue import JobQueue
from .relay_presence import DEFAULT_PRESENCE_INTERVAL_MS, RelayPresence
from .retry import Backoff, exponential_backoff
from .service import BackgroundService
from .spi.outbox import OutboxPublisher, OutboxStore
from .spi.outbox_audit import WORKFLOW_ENTRY_TYPE, outbox_job_key
from .spi.records import OutboxEntry
from .telemetry import (
    current,
    describe_error,
    end_publish_span,
    error_summary,
    start_publish_span,
    traceparent_for,
)

RELAY_LOOP = "relay"
PRUNE_LOOP = "prune"


class OutboxRelay(BackgroundService):
    """Moves outbox entries from a store to a publisher."""

    phase = 20
    service = "outbox relay"

    def __init__(
        self,
        store: OutboxStore,
        publisher: OutboxPublisher,
        *,
        batch_size: int = 100,
        lease_ms: int = 30_000,
        poll_interval_ms: int = 1_000,
        retain_published_ms: int | None = None,
        prune_interval_ms: int = 60_000,
        backoff: Backoff | None = None,
        auto_startup: bool = False,
        presence_interval_ms: int = DEFAULT_PRESENCE_INTERVAL_MS,
    ) -> None:
        sizes = (batch_size, lease_ms, poll_interval_ms, prune_interval_ms, presence_interval_ms)
        if min(sizes) <= 0:
            raise ValueError(
                "batch_size, lease_ms, poll_interval_ms, prune_interval_ms and "
                "presence_interval_ms must be positive"
            )
        if retain_published_ms is not None and retain_published_ms < 0:
            raise ValueError(
                f"retain_published_ms must not be negative (None keeps every published entry), "
                f"got {retain_published_ms}"
            )
        super().__init__(store)
        self.store = store
        self.publisher = publisher
        self.batch_size = batch_size
        self.lease_ms = lease_ms
        self.poll_interval_ms = poll_interval_ms
        self.retain_published_ms = retain_published_ms
        self.prune_interval_ms = prune_interval_ms
        self.backoff = backoff or exponential_backoff(1_000, 30_000)
        self.auto_startup = auto_startup
        self.stats: dict[str, int] = {"published": 0, "failed": 0, "pruned": 0}
        self._next_claim: asyncio.Task[list[OutboxEntry]] | None = None
        self._marking: asyncio.Task[None] | None = None
        self._caught_up = False
        self._unwatch: Callable[[], None] = lambda: None
        self._relay_failures = FailureStreak("relaying outbox entries")
        self._publish_failures = FailureStreak("publishing outbox entries", level="WARNING")
        self._mark_failures = FailureStreak("marking outbox entries published", level="WARNING")
        self._prune_failures = FailureStreak("pruning published outbox entries", level="WARNING")
        self.presence = RelayPresence(store, presence_interval_ms, self._supervisor)

    @property
    def caught_up(self) -> bool:
        """Whether the latest claim found nothing to publish, every batch claimed before it
        handed over (an entry whose lease another relay holds, or whose retry delay has not
        passed, is not claimable and does not count). ``neverlost worker --burst`` waits for
        it before it exits. False from ``start`` until such a claim."""
        return self._caught_up

    def _health_window_ms(self) -> int:
        """Three poll intervals."""
        return 3 * self.poll_interval_ms

    def _on_start(self) -> None:
        """Start relaying (and pruning, with ``retain_published_ms``)."""
        self._caught_up = False
        self._supervisor.spawn(RELAY_LOOP, self._loop)
        if self.retain_published_ms is not None and not self._supervisor.running(PRUNE_LOOP):
            self._supervisor.spawn(PRUNE_LOOP, self._prune_loop)
        self.presence.start()
        self._unwatch = watch_outbox(self.store)

    def _on_stop(self) -> None:
        """Stop claiming entries; a batch being published is finished."""
        self._supervisor.stop()

    async def _on_close(self) -> None:
        """Wait for the batch being handed over; report what ended the loop if not a stop."""
        await self._supervisor.close()
        await self._finish_prefetched_claim()
        await self._marked()
        await self.presence.close()
        self._unwatch()

    async def relay_once(self) -> int:
        """Claim one batch and publish it; how many entries were claimed."""
        return await self._relay(prefetch=False)

    async def _relay(self, *, prefetch: bool) -> int:
        """Hand over one batch (the one claimed ahead, if any); with ``prefetch``, a full batch
        starts the next claim before it is handed over."""
        claiming, self._next_claim = self._next_claim, None
        try:
            entries = await (claiming or self.store.claim(self.batch_size, self.lease_ms))
        except Exception as exc:
            self._store_failed(exc)
            raise
        self._contact.answered()
        self._caught_up = not entries
        if prefetch and len(entries) >= self.batch_size and not self._stopping:
            self._next_claim = asyncio.get_running_loop().create_task(
                self.store.claim(self.batch_size, self.lease_ms), name="jobs.outbox-relay.claim"
            )
        await self._hand_over(entries, mark_later=prefetch)
        return len(entries)

    async def _finish_prefetched_claim(self) -> None:
        """A claim made ahead when the relay stopped: hand its entries over too (one batch)."""
        claiming, self._next_claim = self._next_claim, None
        if claiming is None:
            return
        try:
            await self._hand_over(await claiming)
        except Exception as exc:
            logger.warning(
                "handing over the batch claimed ahead failed at stop ({}); its entries wait "
                "for their lease",
                error_summary(exc),
            )

    async def _loop(self) -> None:
        failures = self._relay_failures
        while not self._stopping:
            try:
                claimed = await self._relay(prefetch=True)
            except Exception as exc:
                delay_ms = self.backoff(failures.count + 1)
                failures.failed(exc, retry_in_ms=delay_ms)
                await self._wait(asyncio.sleep(delay_ms / 1000))
                continue
            failures.succeeded()
            if claimed < self.batch_size:
                await self._wait(self.store.wait_for_entries(self.poll_interval_ms))
        await self._finish_prefetched_claim()

    async def _wait(self, waiting: Any) -> None:
        await self._supervisor.wait(waiting)

    async def _hand_over(self, entries: Sequence[OutboxEntry], *, mark_later: bool = False) -> None:
        """Publish ``entries`` and mark them; ``mark_later``: the batch's mark goes on beside
        the caller's next claim (after the previous batch's mark ended)."""
        if not entries:
            return
        publish_many = getattr(self.publisher, "publish_many", None)
        if publish_many is None or len(entries) == 1:
            for entry in entries:
                await self._publish(entry)
            return
        spans = [start_publish_span(entry) for entry in entries]
        carried = [
            dataclasses.replace(entry, trace_context=traceparent_for(span, entry.trace_context))
            for entry, span in zip(entries, spans, strict=True)
        ]
        try:
            await publish_many(carried)
        except Exception as exc:
            for span in spans:
                end_publish_span(span, exc)
            logger.warning(
                "publishing a batch of {} outbox entries failed ({}); publishing one by one",
                len(entries),
                error_summary(exc),
            )
            for entry in entries:
                await self._publish(entry)
            return
        for span in spans:
            end_publish_span(span)
        if not mark_later:
            await self._mark(entries)
            return
        await self._marked()
        self._marking = asyncio.get_running_loop().create_task(
            self._mark(entries), name="jobs.outbox-relay.mark"
        )

    async def _marked(self) -> None:
        """Wait for the batch mark in flight, if any; a failed one is logged, its entries left
        to their lease."""
        marking, self._marking = self._marking, None
        if marking is None:
            return
        try:
            await marking
        except Exception as exc:
            self._contact.failed(exc)
            self._mark_failures.failed(
                exc, then="the batch's entries are handed over again after their lease"
            )
        else:
            self._mark_failures.succeeded()

    async def _mark(self, entries: Sequence[OutboxEntry]) -> None:
        marked = set(await self.store.mark_published_many(entries))
        self.stats["published"] += len(marked)
        record_published_batch(entries, marked)
        for entry in entries:
            if entry.id not in marked:
                self._warn_reclaimed(entry)

    async def _publish(self, entry: OutboxEntry) -> None:
        span = start_publish_span(entry)
        try:
            with current(span):
                await self.publisher.publish(entry)
        except Exception as exc:
            end_publish_span(span, exc)
            self.stats["failed"] += 1
            delay_ms = self.backoff(entry.attempts)
            self._publish_failures.failed(
                exc, then=f"entry {entry.id} ({entry.type}) is retried in {delay_ms} ms"
            )
            await self.store.release(
                entry.id, entry.lease_token, delay_ms=delay_ms, error=describe_error(exc)
            )
            return
        end_publish_span(span)
        self._publish_failures.succeeded()
        if await self.store.mark_published(entry.id, entry.lease_token):
            self.stats["published"] += 1
            record_published(entry.type)
        else:
            self._warn_reclaimed(entry)

    def _warn_reclaimed(self, entry: OutboxEntry) -> None:
        logger.bind(entry_id=entry.id).warning(
            "outbox entry {} was reclaimed before it was marked; it will be handed over again",
            entry.id,
        )

    async def _prune_loop(self) -> None:
        """Delete published entries past ``retain_published_ms``, now and every interval: batch
        after batch (the store bounds each call) until none is left or the relay stops."""
        supervisor, failures = self._supervisor, self._prune_failures
        retain_ms = self.retain_published_ms
        assert retain_ms is not None
        while not supervisor.stopping(PRUNE_LOOP):
            total = 0
            try:
                while pruned := await self.store.prune(retain_ms):
                    total += pruned
                    self.stats["pruned"] += pruned
                    if supervisor.stopping(PRUNE_LOOP):
                        break
            except Exception as exc:
                failures.failed(exc, then=f"pruning again in {self.prune_interval_ms} ms")
            else:
                failures.succeeded()
            if total:
                logger.debug("pruned {} published outbox entries", total)
            await supervisor.wait(asyncio.sleep(self.prune_interval_ms / 1000))


class JobOutboxPublisher:
    """Publishes an entry as a job, keyed ``outbox:<entry id>`` (or the entry's own key).

    A relay that crashed after publishing and before marking hands the entry over again; the
    key makes the queue drop the repeat, so the job runs once. An entry holding a workflow
    (``WORKFLOW_ENTRY_TYPE``, ``append_workflow``) is stored as that workflow, once
    (``jobs.outbox_workflows``).
    """

    def __init__(self, queue: JobQueue) -> None:
        self._queue = queue

    async def publish(self, entry: OutboxEntry) -> None:
        if entry.type == WORKFLOW_ENTRY_TYPE:
            await publish_workflow(self._queue, entry)
            return
        run_at, delay_ms = _due(entry)
        await self._queue.enqueue(
            entry.type,
            entry.payload,
            key=_job_key(entry),
            delay_ms=delay_ms,
            run_at=run_at,
            max_attempts=entry.max_attempts,
            priority=entry.priority,
            queue=entry.queue,
        )

    async def publish_many(self, entries: Sequence[OutboxEntry]) -> None:
        """Enqueue the batch in one driver call (``JobQueue.enqueue_many``), each entry keyed;
        a workflow's entry on its own (``publish``), after the batch."""
        jobs = []
        workflows = [entry for entry in entries if entry.type == WORKFLOW_ENTRY_TYPE]
        for entry in entries:
            if entry.type == WORKFLOW_ENTRY_TYPE:
                continue
            run_at, delay_ms = _due(entry)
            jobs.append(
                NewJob(
                    type=entry.type,
                    payload=entry.payload,
                    key=_job_key(entry),
                    delay_ms=delay_ms,
                    run_at=run_at,
                    max_attempts=entry.max_attempts,
                    trace_context=entry.trace_context,
                    priority=entry.priority,
                    queue=entry.queue,
                )
            )
        if jobs:
            await self._queue.enqueue_many(jobs)
        for entry in workflows:
            await publish_workflow(self._queue, entry)


def _due(entry: OutboxEntry) -> tuple[datetime | None, int | None]:
    """The job's ``run_at`` (the absolute time the store fixed at the append) or, for an entry
    without one (written before it existed), its ``delay_ms``, counted from now."""
    if entry.run_at_ms is not None:
        return to_datetime(entry.run_at_ms), None
    return None, entry.delay_ms


def _job_key(entry: OutboxEntry) -> str:
    return outbox_job_key(entry.id, entry.key)
