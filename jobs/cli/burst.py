"""``--burst``: is anything left for this worker? (Nothing in flight and nothing due.)"""

from __future__ import annotations

from loguru import logger

from ..queue import JobQueue
from ..runner import JobRunner
from .running import STORE_FAILURES, describe_failure


async def due_jobs(queue: JobQueue, types: frozenset[str]) -> int:
    """How many jobs of ``types`` are due now (pending with run_at reached)."""
    stats = await queue.stats()
    return sum(stats[job_type].due for job_type in types if job_type in stats)


async def nothing_due(queue: JobQueue, runner: JobRunner) -> bool:
    """True when the runner holds no job and none of its types is due, in that order: a job
    claimed while the store was asked shows in ``in_flight`` afterwards."""
    if runner.in_flight:
        return False
    try:
        due = await due_jobs(queue, runner.registry.types)
    except STORE_FAILURES as exc:
        logger.warning("burst: cannot ask the store what is due ({})", describe_failure(exc))
        return False
    return due == 0 and runner.in_flight == 0
