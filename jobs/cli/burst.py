"""``--burst``: is anything left for this worker? (Nothing to relay, nothing in flight and
nothing due.)"""

from __future__ import annotations

from loguru import logger

from ..outbox_relay import OutboxRelay
from ..queue import JobQueue
from ..runner import JobRunner
from .running import STORE_FAILURES, describe_failure


async def due_jobs(queue: JobQueue, types: frozenset[str]) -> int:
    """How many jobs of ``types`` are due now (pending with run_at reached)."""
    stats = await queue.stats()
    return sum(stats[job_type].due for job_type in types if job_type in stats)


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
        due = await due_jobs(queue, runner.registry.types)
    except STORE_FAILURES as exc:
        logger.warning("burst: cannot ask the store what is due ({})", describe_failure(exc))
        return False
    return due == 0 and runner.in_flight == 0
