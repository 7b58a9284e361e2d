"""``enqueued`` and ``assert_enqueued``: what waits in the queue, payloads decoded.

A payload is shown as its model when the job type has a definition (given, or known from the
handler declared with one), validated on the way: a waiting job that no longer fits its model
fails the look-up with the model's error, as it would fail in the worker.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from framework import ApplicationContext

from ..definitions import JobDefinition
from ..handlers import JobHandlerRegistry
from ..queue import JobQueue
from ..spi import JobDriver, JobInfo
from ..tokens import JOB_DRIVER, JOB_HANDLER_REGISTRY

_PAGE = 500


@dataclass(frozen=True, slots=True, kw_only=True)
class EnqueuedJob:
    """A pending job (due or scheduled); ``payload`` is the model when the type has one."""

    id: str
    type: str
    payload: Any
    key: str | None
    run_at: datetime
    attempts: int
    max_attempts: int


async def enqueued(
    target: ApplicationContext | JobQueue,
    type: str | JobDefinition[Any] | None = None,
    payload: Any = None,
    *,
    key: str | None = None,
) -> list[EnqueuedJob]:
    """The pending jobs of ``target``, by run_at, then oldest first; only those of
    ``type``, with ``payload`` (equal once decoded; a mapping or a model when the type has a
    definition) and ``key``, when given."""
    driver, registry = _parts(target)
    definition = _definition(type, registry)
    wanted = None if payload is None or definition is None else definition.validate(payload)
    job_type = type.type if isinstance(type, JobDefinition) else type
    found: list[EnqueuedJob] = []
    for info in await pending_jobs(driver, job_type):
        if key is not None and info.key != key:
            continue
        job = _decoded(info, definition or _definition(info.type, registry))
        if payload is not None and job.payload != (wanted if wanted is not None else payload):
            continue
        found.append(job)
    return found


async def assert_enqueued(
    target: ApplicationContext | JobQueue,
    type: str | JobDefinition[Any],
    payload: Any = None,
    *,
    key: str | None = None,
    count: int | None = None,
) -> list[EnqueuedJob]:
    """The pending jobs that match (see ``enqueued``); an AssertionError listing what waits
    when none does, or when ``count`` is given and another number does."""
    found = await enqueued(target, type, payload, key=key)
    if (count is None and found) or (count is not None and len(found) == count):
        return found
    job_type = type.type if isinstance(type, JobDefinition) else type
    wanted = f"{count if count is not None else 'a'} pending {job_type!r} job(s)"
    if payload is not None:
        wanted += f" with payload {payload!r}"
    if key is not None:
        wanted += f" with key {key!r}"
    waiting = await enqueued(target)
    listed = "\n".join(f"  {job.type} {job.payload!r} key={job.key!r}" for job in waiting)
    raise AssertionError(
        f"expected {wanted}, found {len(found)}; waiting:\n{listed or '  (nothing)'}"
    )


def _parts(target: ApplicationContext | JobQueue) -> tuple[JobDriver, JobHandlerRegistry | None]:
    if isinstance(target, ApplicationContext):
        registry = (
            target.get_value(JOB_HANDLER_REGISTRY) if JOB_HANDLER_REGISTRY in target else None
        )
        return target.get_value(JOB_DRIVER), registry
    if isinstance(target, JobQueue):
        return target.driver, target.registry
    raise TypeError(f"expected an ApplicationContext or a JobQueue, got {target!r}")


def _definition(
    type: str | JobDefinition[Any] | None, registry: JobHandlerRegistry | None
) -> JobDefinition[Any] | None:
    if type is None or isinstance(type, JobDefinition):
        return type
    handler = registry.get(type) if registry is not None else None
    return handler.options.definition if handler is not None else None


async def pending_jobs(driver: JobDriver, job_type: str | None = None) -> list[JobInfo]:
    """Every pending job (of ``job_type``), by run_at, then oldest first (to the
    millisecond), through the operations SPI (``list_jobs``), page by page."""
    found: list[JobInfo] = []
    cursor: str | None = None
    while True:
        page = await driver.list_jobs(
            state="pending", job_type=job_type, limit=_PAGE, cursor=cursor
        )
        found.extend(page.jobs)
        cursor = page.next_cursor
        if cursor is None:
            break
    found.reverse()  # listed newest first
    return sorted(found, key=lambda info: info.run_at)  # stable: creation order within a time


def _decoded(info: JobInfo, definition: JobDefinition[Any] | None) -> EnqueuedJob:
    return EnqueuedJob(
        id=info.id,
        type=info.type,
        payload=definition.validate(info.payload) if definition is not None else info.payload,
        key=info.key,
        run_at=info.run_at,
        attempts=info.attempts,
        max_attempts=info.max_attempts,
    )
