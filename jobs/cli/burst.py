"""``--burst``: is anything left for this worker? (Nothing to relay, nothing in flight and
nothing due.)"""

from __future__ import annotations

from loguru import logger

from ..options import DEFAULT_QUEUE
from ..outbox_relay import OutboxRelay
from ..queue import JobQueue
from ..runner import JobRunner
from .running import STORE_FAILURES, describe_failure


async def due_jobs(
    queue: JobQueue, types: frozenset[str], queues: tuple[str, ...] = (DEFAULT_QUEUE,)
) -> int:
    """How many jobs of ``types`` are due now (pending with run_at reached); 0 also when no
    job of the named ``queues`` is due (a job this worker can claim is of one of its types
    and in one of its queues: if either count is 0, none is)."""
    stats = await queue.stats()
    due = sum(stats[job_type].due for job_type in types if job_type in stats)
    if due == 0 or queues == (DEFAULT_QUEUE,):  # one read: the race with a claim as before
        return due
    try:
        by_queue = await queue.queue_stats()
    except NotImplementedError:
        return due
    return due if any(by_queue[name].due for name in queues if name in by_queue) else 0


async def nothing_due(
    queue: JobQueue, runner: JobRunner, relay: OutboxRelay | None = None
) -> bool:
    """True when the relay this worker runs (if any) is caught up, the runner holds no job
    and none of its types is due, in that order: the jobs a caught-up relay handed over are
    in the store before the runner and the store are asked, and a job claimed while the store
    was asked shows in ``in_flight`` afterwards."""
    if relay is not None and relay.is_running and not relay.caught_up:
        return False
    if runner.in_flight:
        return False
    try:
        due = await due_jobs(queue, runner.registry.types, runner.queues.names)
    except STORE_FAILURES as exc:
        logger.warning("burst: cannot ask the store what is due ({})", describe_failure(exc))
        return False
    return due == 0 and runner.in_flight == 0
