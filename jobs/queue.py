"""JobQueue: the producer facade. Validates, then hands the job to the driver bean."""

from __future__ import annotations

import asyncio
import os
import time
import uuid
from collections.abc import Awaitable, Iterable, Mapping
from dataclasses import replace
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal, TypeVar, overload

from pydantic import BaseModel

from . import audit, queue_control
from . import operations as check
from .audit import Actor
from .definitions import JobDefinition
from .errors import DriverError, JobOptionError
from .fleet_limits import parse_queue_limits
from .metrics import record_enqueued, record_enqueued_batch
from .new_job import NewJob
from .options import (
    DEFAULT_QUEUE,
    MAX_ATTEMPTS,
    MAX_DELAY_MS,
    MAX_PRIORITY,
    MAX_TIMEOUT_MS,
    MIN_PRIORITY,
    check_delay_ms,
    check_max_attempts,
    check_priority,
    check_queue,
    check_run_at,
    check_timeout_ms,
)
from .payload import MAX_KEY_LENGTH, MAX_TYPE_LENGTH, check_name, encode_payload
from .queue_control import QueueInfo
from .settings import DEFAULT_MAX_ATTEMPTS, JobsSettings
from .spi.driver import AuditTrail, JobDriver, OutcomeCounters, QueueOperations, WorkflowStore
from .spi.records import (
    AuditPage,
    JobInfo,
    JobPage,
    JobRequest,
    JobTypeStats,
    OutcomeCount,
    QueueStats,
    WorkerInfo,
    WorkflowInfo,
    WorkflowJob,
)
from .telemetry import (
    current_traceparent,
    enqueue_many_span,
    enqueue_span,
    enqueued,
    enqueued_batch,
    tracing,
)

if TYPE_CHECKING:
    from .handlers import JobHandlerRegistry, RegisteredHandler
    from .sync_queue import SyncJobQueue
    from .workflow import Workflow

M = TypeVar("M", bound=BaseModel)


def new_job_id() -> str:
    """32 hex characters: milliseconds since the epoch, then 80 random bits (sorts by time)."""
    return _id_stamp() + os.urandom(10).hex()


def workflow_job_id(workflow_id: str, index: int) -> str:
    """The id of the ``index``-th job of a workflow stored under a given id (``enqueue_workflow``
    with ``workflow_id``): the same every time, so a second store of it is refused."""
    return uuid.uuid5(_WORKFLOW_JOBS, f"{workflow_id}/{index}").hex


_WORKFLOW_JOBS = uuid.UUID("5d4c1ad2-7b9e-4f0a-9a53-2f7c0e51b6a1")
"""The namespace of ``workflow_job_id``'s name-based (version 5) ids."""


def new_job_ids(count: int) -> list[str]:
    """``count`` ids as ``new_job_id`` makes them, the random bits read in one system call."""
    stamp = _id_stamp()
    noise = os.urandom(10 * count).hex()
    return [stamp + noise[start : start + 20] for start in range(0, 20 * count, 20)]


def _id_stamp() -> str:
    """A job id's first 12 hex characters: milliseconds since the epoch."""
    return f"{time.time_ns() // 1_000_000:012x}"


class JobQueue:
    """Enqueues jobs to the driver it is given, and operates them (list, retry, cancel, ...)."""

    def __init__(
        self,
        driver: JobDriver,
        *,
        settings: JobsSettings | None = None,
        registry: JobHandlerRegistry | None = None,
    ) -> None:
        self._driver = driver
        settings = settings or JobsSettings()
        self._max_payload_bytes = settings.max_payload_bytes
        self._default_max_stalls = settings.max_stalls
        self._queue_limits = parse_queue_limits(settings.queue_limits)
        self._registry = registry

    @property
    def driver(self) -> JobDriver:
        return self._driver

    def sync(self) -> SyncJobQueue:
        """This queue for sync code (threads with no event loop): a ``SyncJobQueue`` whose
        calls run here, on the loop running now (call it on that loop: in a FastAPI lifespan,
        say), or on a loop of its own in a thread when none runs. The queue's driver is not
        closed by the SyncJobQueue."""
        from .sync_queue import SyncJobQueue

        return SyncJobQueue(self)

    @property
    def registry(self) -> JobHandlerRegistry | None:
        """The handlers this queue consults (their options win over a request's), if any."""
        return self._registry

    @overload
    async def enqueue(
        self,
        type_or_definition: JobDefinition[M],
        payload: M | Mapping[str, Any],
        *,
        delay_ms: int | None = None,
        run_at: datetime | None = None,
        max_attempts: int | None = None,
        timeout_ms: int | None = None,
        key: str | None = None,
        priority: int | None = None,
        queue: str | None = None,
    ) -> str | None: ...

    @overload
    async def enqueue(
        self,
        type_or_definition: str,
        payload: Any = None,
        *,
        delay_ms: int | None = None,
        run_at: datetime | None = None,
        max_attempts: int | None = None,
        timeout_ms: int | None = None,
        key: str | None = None,
        priority: int | None = None,
        queue: str | None = None,
    ) -> str | None: ...

    async def enqueue(
        self,
        type_or_definition: str | JobDefinition[Any],
        payload: Any = None,
        *,
        delay_ms: int | None = None,
        run_at: datetime | None = None,
        max_attempts: int | None = None,
        timeout_ms: int | None = None,
        key: str | None = None,
        priority: int | None = None,
        queue: str | None = None,
    ) -> str | None:
        """Store a job; its id, or None when a live job already holds ``key``.

        With a job definition the payload is its model or a mapping the model validates
        (type checkers refuse anything else); with a type string, any JSON value, validated
        all the same against the definition of the type's handler when this queue's registry
        has one (``resolve_job``: typed by name). A type with no definition registered here (a
        producer-only app, a handler taking a plain payload, a context not started) is checked
        as JSON only.

        Raises PayloadError (a ValueError) naming the path of anything in ``payload`` that is
        not JSON, and before any I/O. Runs in a PRODUCER span ``jobs.enqueue <type>``, whose
        trace context the job carries to its execution.

        ``priority`` (``MIN_PRIORITY`` to ``MAX_PRIORITY``): among due jobs a higher one is
        claimed first, FIFO by due time within a priority; None: the handler's default, else
        the definition's, else 0. ``queue``: the named queue the job waits in (only runners
        serving it claim it; ``check_queue``); None: the handler's default, else the
        definition's, else ``"default"``.
        """
        return await self._submit(
            type_or_definition,
            payload,
            delay_ms,
            run_at,
            max_attempts,
            timeout_ms,
            key,
            priority=priority,
            queue=queue,
        )

    async def _submit(
        self,
        type_or_definition: str | JobDefinition[Any],
        payload: Any,
        delay_ms: int | None,
        run_at: datetime | None,
        max_attempts: int | None,
        timeout_ms: int | None,
        key: str | None,
        keep_until_ms: int | None = None,
        timeout_s: float | None = None,
        priority: int | None = None,
        queue: str | None = None,
    ) -> str | None:
        """The one way a single job reaches the driver, for ``enqueue`` and the scheduler (an
        internal of the package, not API): the PRODUCER span (the request is built inside it,
        so the job carries its trace context), the driver call (bounded by ``timeout_s`` if
        given), the metric.

        ``keep_until_ms``: keep the job (and so its key) at least until then (epoch ms), though
        retention would prune it sooner (the scheduler's occurrence keys).
        """
        job_type = _job_type(type_or_definition)
        if not tracing():  # no span at all: its no-op scope cost ~0.9 us, 8% of our Python
            request = self._request(
                type_or_definition,
                job_type,
                payload,
                new_job_id(),
                current_traceparent(),
                delay_ms=delay_ms,
                run_at=run_at,
                max_attempts=max_attempts,
                timeout_ms=timeout_ms,
                key=key,
                keep_until_ms=keep_until_ms,
                priority=priority,
                queue=queue,
            )
            job_id = await self._send(request, timeout_s)
        else:
            with enqueue_span(job_type) as span:
                request = self._request(
                    type_or_definition,
                    job_type,
                    payload,
                    new_job_id(),
                    current_traceparent(),
                    delay_ms=delay_ms,
                    run_at=run_at,
                    max_attempts=max_attempts,
                    timeout_ms=timeout_ms,
                    key=key,
                    keep_until_ms=keep_until_ms,
                    priority=priority,
                    queue=queue,
                )
                job_id = await self._send(request, timeout_s)
                enqueued(span, request, job_id)
        if job_id is not None:
            record_enqueued(job_type)
        return job_id

    def _send(self, request: JobRequest, timeout_s: float | None) -> Awaitable[str | None]:
        """The driver's ``enqueue`` (its coroutine itself: no frame of ours in between)."""
        if timeout_s is None:
            return self._driver.enqueue(request)
        return self._send_within(request, timeout_s)

    async def _send_within(self, request: JobRequest, timeout_s: float) -> str | None:
        async with asyncio.timeout(timeout_s):
            return await self._driver.enqueue(request)

    async def enqueue_many(self, jobs: Iterable[NewJob]) -> list[str | None]:
        """Store a batch in one driver call; per job, in order, its id or None (key taken).

        A key taken by a live job, or by an earlier job of the batch, gives None (the first
        wins). Every job is validated before any I/O: one bad payload raises (PayloadError
        naming the job's index and path) and nothing is stored.
        """
        batch = list(jobs)
        if not batch:
            return []
        with enqueue_many_span(len(batch)) as span:
            requests = self._build_batch(batch)
            enqueued_batch(span, requests)
            ids = await self._driver.enqueue_many(requests)
        record_enqueued_batch(requests, ids)
        return ids

    async def enqueue_workflow(self, workflow: Workflow, *, workflow_id: str | None = None) -> str:
        """Store every job of ``workflow`` (``jobs.workflow``) in one driver call, all or
        nothing; the workflow's id (``JobInfo.workflow_id`` of each job).

        Checked whole before any I/O: WorkflowError for a cycle, an unknown parent or a keyed
        job, PayloadError naming the job's index for a bad payload. DriverError when the
        driver does not store workflows (``jobs.spi.WorkflowStore``).

        ``workflow_id`` (the relay's for an outbox entry, ``jobs.spi.outbox_workflow_id``)
        names it instead of a new id, and each job's id derives from it and the job's place:
        storing it a second time is refused by the driver (the ids exist), never done twice.
        """
        steps = workflow.steps()
        driver = self._workflow_store()
        requests = self._build_batch([step.job for step in steps])
        if workflow_id is not None:
            requests = [
                replace(request, id=workflow_job_id(workflow_id, index))
                for index, request in enumerate(requests)
            ]
        jobs = []
        for step, request in zip(steps, requests, strict=True):
            parents = tuple(requests[index].id for index in step.after)
            jobs.append(
                WorkflowJob(
                    request=request,
                    depends_on=parents,
                    continue_after=parents if step.on_failure == "continue" else (),
                )
            )
        workflow_id = new_job_id() if workflow_id is None else workflow_id
        await driver.enqueue_workflow(workflow_id, jobs)
        return workflow_id

    async def get_workflow(self, workflow_id: str) -> WorkflowInfo | None:
        """The workflow's jobs (state, progress, result...) in dependency order, and its
        state; None when no job of it is stored (unknown, or retention removed them all)."""
        jobs = await self._workflow_store().workflow_jobs(workflow_id)
        if not jobs:
            return None
        states = {job.state for job in jobs}
        state: Literal["running", "completed", "failed", "cancelled"]
        if states & {"pending", "active"}:
            state = "running"
        elif states == {"completed"}:
            state = "completed"
        elif "failed" in states:
            state = "failed"
        else:
            state = "cancelled"
        return WorkflowInfo(id=workflow_id, state=state, jobs=jobs)

    async def cancel_workflow(self, workflow_id: str, *, actor: Actor | None = None) -> int:
        """Cancel every pending or active job of the workflow (each as ``cancel`` would,
        their dependents with them); how many this call cancelled (recorded in the audit trail
        as one ``cancel_workflow``)."""
        cancelled = 0
        for job in await self._workflow_store().workflow_jobs(workflow_id):
            if job.state in ("pending", "active") and await self._driver.cancel(job.id):
                cancelled += 1
        await audit.record(self._driver, actor, "cancel_workflow", workflow_id, cancelled)
        return cancelled

    def _workflow_store(self) -> WorkflowStore:
        driver = self._driver
        if not isinstance(driver, WorkflowStore):
            raise DriverError(
                f"{type(driver).__name__} does not store workflows (jobs.spi.WorkflowStore)"
            )
        return driver

    def _build_batch(self, jobs: list[NewJob]) -> list[JobRequest]:
        """Each job's request, as ``build_request`` makes it; what is the same for the whole
        batch (the caller's trace context, the check of a type name seen before, the random
        bits of the ids) is done once."""
        ids = new_job_ids(len(jobs))
        traceparent = current_traceparent()
        types: dict[str, str] = {}
        requests = []
        for index, job in enumerate(jobs):
            try:
                kind = job.type
                if type(kind) is str:
                    job_type = types.get(kind) or types.setdefault(kind, _job_type(kind))
                else:
                    job_type = _job_type(kind)
                trace = job.trace_context
                requests.append(
                    self._request(
                        kind,
                        job_type,
                        job.payload,
                        ids[index],
                        trace if trace is not None else traceparent,
                        delay_ms=job.delay_ms,
                        run_at=job.run_at,
                        max_attempts=job.max_attempts,
                        timeout_ms=job.timeout_ms,
                        key=job.key,
                        priority=job.priority,
                        queue=job.queue,
                    )
                )
            except ValueError as exc:
                exc.add_note(f"in job {index} of the batch; nothing was enqueued")
                raise
        return requests

    def build_request(
        self,
        type_or_definition: str | JobDefinition[Any],
        payload: Any = None,
        *,
        delay_ms: int | None = None,
        run_at: datetime | None = None,
        max_attempts: int | None = None,
        timeout_ms: int | None = None,
        key: str | None = None,
        trace_context: str | None = None,
        priority: int | None = None,
        queue: str | None = None,
    ) -> JobRequest:
        """The validated request ``enqueue`` would store (for drivers' batch APIs and tests)."""
        return self._request(
            type_or_definition,
            _job_type(type_or_definition),
            payload,
            new_job_id(),
            trace_context if trace_context is not None else current_traceparent(),
            delay_ms=delay_ms,
            run_at=run_at,
            max_attempts=max_attempts,
            timeout_ms=timeout_ms,
            key=key,
            priority=priority,
            queue=queue,
        )

    def _request(
        self,
        type_or_definition: str | JobDefinition[Any],
        job_type: str,
        payload: Any,
        job_id: str,
        trace_context: str | None,
        *,
        delay_ms: int | None,
        run_at: datetime | None,
        max_attempts: int | None,
        timeout_ms: int | None,
        key: str | None,
        keep_until_ms: int | None = None,
        priority: int | None = None,
        queue: str | None = None,
    ) -> JobRequest:
        registry = self._registry
        handler = registry.get(job_type) if registry is not None else None
        definition = _definition_of(type_or_definition, handler)
        if definition is not None:
            payload = definition.to_json_value(payload)
        if key is not None:
            check_name("key", key, MAX_KEY_LENGTH)
        run_at_ms = None
        if delay_ms is not None:
            if type(delay_ms) is not int or not 0 <= delay_ms <= MAX_DELAY_MS:
                delay_ms = check_delay_ms(delay_ms)
            if run_at is not None:
                raise _both(delay_ms, run_at)
        elif run_at is not None:
            run_at_ms = check_run_at(run_at)
        if timeout_ms is None:
            timeout_ms = _definition_timeout(definition)
        elif type(timeout_ms) is not int or not 0 < timeout_ms <= MAX_TIMEOUT_MS:
            timeout_ms = check_timeout_ms(timeout_ms)
        if max_attempts is not None and (
            type(max_attempts) is not int or not 0 < max_attempts <= MAX_ATTEMPTS
        ):
            max_attempts = check_max_attempts(max_attempts)
        if handler is None and definition is None:  # the request's, else the defaults
            max_stalls = self._default_max_stalls
            if max_attempts is None:
                max_attempts = DEFAULT_MAX_ATTEMPTS
        else:
            max_stalls = self._max_stalls(handler, definition)
            max_attempts = self._max_attempts(handler, definition, max_attempts)
        priority = _priority(priority, handler, definition)
        queue = _queue(queue, handler, definition)
        text = encode_payload(payload, max_bytes=self._max_payload_bytes)
        return JobRequest(
            id=job_id,
            type=job_type,
            payload=text,
            max_attempts=max_attempts,
            timeout_ms=timeout_ms,
            key=key,
            delay_ms=delay_ms or 0,
            run_at_ms=run_at_ms,
            keep_until_ms=keep_until_ms,
            trace_context=trace_context,
            max_stalls=max_stalls,
            priority=priority,
            queue=queue,
        )

    # -- operating it --------------------------------------------------------------------------

    async def list_jobs(
        self,
        *,
        state: str | None = None,
        type: str | None = None,
        limit: int = 50,
        cursor: str | None = None,
        queue: str | None = None,
    ) -> JobPage:
        """A page of jobs newest first; ``cursor=page.next_cursor`` for the next one.
        ``queue``: only the jobs of that named queue."""
        job_state = check.check_state(state) if state is not None else None
        job_type = check.check_type(type) if type is not None else None
        size = check.check_limit(limit)
        after = check.check_cursor(cursor) if cursor is not None else None
        if queue is None:  # a driver written before queues is called as it was
            return await self._driver.list_jobs(
                state=job_state, job_type=job_type, limit=size, cursor=after
            )
        return await self._driver.list_jobs(
            state=job_state,
            job_type=job_type,
            limit=size,
            cursor=after,
            queue=check_queue(queue),
        )

    async def get_job(self, job_id: str) -> JobInfo | None:
        return await self._driver.get_job(check.check_job_id(job_id))

    async def find_job(self, *, key: str) -> JobInfo | None:
        """The job holding idempotency ``key`` (in any state, until retention prunes it)."""
        return await self._driver.find_job(check.check_key(key))

    # Each action below is recorded in the store's audit trail (``jobs.audit``): ``actor``
    # says who asked and through what (default: this process's user@host, source "api").

    async def retry(self, job_id: str, *, actor: Actor | None = None) -> bool:
        """A failed or cancelled job runs again now, with exactly one more attempt.

        True if it moved; False for a job in any other state or an unknown id.
        """
        moved = await self._driver.requeue(check.check_job_id(job_id))
        await audit.record(self._driver, actor, "retry", job_id, int(moved))
        return moved

    async def retry_failed(self, type: str | None = None, *, actor: Actor | None = None) -> int:
        """``retry`` every failed job (of ``type``); how many moved."""
        job_type = check.check_type(type) if type is not None else None
        moved = await self._driver.requeue_failed(job_type)
        target = "failed jobs" + (f" of type {job_type}" if job_type else "")
        await audit.record(self._driver, actor, "retry_failed", target, moved)
        return moved

    async def cancel(self, job_id: str, *, actor: Actor | None = None) -> bool:
        """A pending job is cancelled; an active one too, and its handler is interrupted.

        True if it was cancelled; False for a finished job or an unknown id.
        """
        cancelled = await self._driver.cancel(check.check_job_id(job_id))
        await audit.record(self._driver, actor, "cancel", job_id, int(cancelled))
        return cancelled

    async def purge(
        self,
        states: Iterable[str] = ("completed",),
        type: str | None = None,
        older_than_ms: int | None = None,
        *,
        actor: Actor | None = None,
    ) -> int:
        """Delete jobs in ``states`` (never ``active``), freeing their keys; how many went."""
        chosen = check.check_purge_states(states)
        job_type = check.check_type(type) if type is not None else None
        age = check.check_age(older_than_ms) if older_than_ms is not None else None
        count = await self._driver.purge(chosen, job_type, age)
        target = "/".join(chosen) + " jobs" + (f" of type {job_type}" if job_type else "")
        if age is not None:
            target += f" older than {audit.describe_age(age)}"
        await audit.record(self._driver, actor, "purge", target, count)
        return count

    async def delete(self, job_id: str, *, actor: Actor | None = None) -> bool:
        """Delete one job (any state but active), freeing its key; True if it went.

        False for an active job (cancel it first) or an unknown id.
        """
        deleted = await self._driver.delete(check.check_job_id(job_id))
        await audit.record(self._driver, actor, "delete", job_id, int(deleted))
        return deleted

    async def outcome_counts(self, *, since_ms: int, type: str | None = None) -> list[OutcomeCount]:
        """The per-minute outcome counters from ``since_ms`` (epoch ms) on: executions by type
        and outcome with their runtimes (``jobs.counters.summarize`` totals them). They outlive
        the jobs: a purge or retention does not change them.

        NotImplementedError for a driver without counters (``jobs.spi.OutcomeCounters``).
        """
        driver = self._driver
        if not isinstance(driver, OutcomeCounters):
            raise NotImplementedError(f"{type_name(driver)} keeps no outcome counters")
        job_type = check.check_type(type) if type is not None else None
        return await driver.read_counts(check.check_age(since_ms), job_type)

    async def list_actions(self, *, limit: int = 50, cursor: str | None = None) -> AuditPage:
        """The audit trail, newest first: who retried, cancelled, deleted or purged what.

        NotImplementedError for a driver without an audit trail (``jobs.spi.AuditTrail``).
        """
        driver = self._driver
        if not isinstance(driver, AuditTrail):
            raise NotImplementedError(f"{type(driver).__name__} keeps no audit trail")
        return await driver.list_actions(
            limit=check.check_limit(limit),
            cursor=check.check_cursor(cursor) if cursor is not None else None,
        )

    async def stats(self) -> dict[str, JobTypeStats]:
        """Per job type: due, scheduled, active, completed, failed, cancelled, oldest due age."""
        return await self._driver.stats()

    async def queue_stats(self) -> dict[str, QueueStats]:
        """Per named queue present in the store: its jobs by state and the oldest due job's
        age (``stats()`` gives the same per job type).

        NotImplementedError for a driver without it (``jobs.spi.QueueOperations``).
        """
        driver = self._driver
        if not isinstance(driver, QueueOperations):
            raise NotImplementedError(f"{type_name(driver)} reports no queues")
        return await driver.queue_stats()

    async def pause_queue(self, queue: str, *, actor: Actor | None = None) -> bool:
        """Pause a named queue, in the store: every runner stops claiming from it within one
        poll interval; jobs running finish; enqueues still succeed. False if it was paused.
        Recorded in the audit trail. NotImplementedError for a driver without
        ``jobs.spi.QueuePauses``."""
        return await queue_control.pause_queue(self._driver, queue, actor)

    async def resume_queue(self, queue: str, *, actor: Actor | None = None) -> bool:
        """Resume a paused queue (claimed from again within one poll interval); False if it
        was not paused. Recorded in the audit trail."""
        return await queue_control.resume_queue(self._driver, queue, actor)

    async def list_queues(self) -> list[QueueInfo]:
        """The named queues: each queue with a live job, each paused one, each one with
        limits (``JobsSettings.queue_limits``), and "default"."""
        return await queue_control.list_queues(self._driver, self._queue_limits)

    async def workers(self) -> list[WorkerInfo]:
        """The worker processes seen within their last three heartbeat intervals."""
        return await self._driver.list_workers()

    @staticmethod
    def _max_attempts(
        handler: RegisteredHandler | None,
        definition: JobDefinition[Any] | None,
        requested: int | None,
    ) -> int:
        """The handler's setting wins, then the request's, then the definition's, then 3."""
        if handler is not None and handler.options.max_attempts is not None:
            return handler.options.max_attempts
        if requested is not None:
            return requested
        if definition is not None and definition.max_attempts is not None:
            return definition.max_attempts
        return DEFAULT_MAX_ATTEMPTS

    def _max_stalls(
        self, handler: RegisteredHandler | None, definition: JobDefinition[Any] | None
    ) -> int:
        """The handler's setting wins, then the definition's, then the settings'."""
        if handler is not None and handler.options.max_stalls is not None:
            return handler.options.max_stalls
        if definition is not None and definition.max_stalls is not None:
            return definition.max_stalls
        return self._default_max_stalls


def _job_type(type_or_definition: str | JobDefinition[Any]) -> str:
    if isinstance(type_or_definition, JobDefinition):
        return type_or_definition.type
    return check_name("job type", type_or_definition, MAX_TYPE_LENGTH)


def _priority(
    requested: int | None,
    handler: RegisteredHandler | None,
    definition: JobDefinition[Any] | None,
) -> int:
    """A job's priority: the enqueue's (checked), else the handler's (which took the
    definition's when it had none of its own), else the definition's, else 0. Unlike
    ``max_attempts``, the request wins: a handler's priority is a default."""
    if requested is not None:
        if type(requested) is int and MIN_PRIORITY <= requested <= MAX_PRIORITY:
            return requested
        return check_priority(requested)
    if handler is not None and handler.options.priority is not None:
        return handler.options.priority
    if definition is not None and definition.priority is not None:
        return definition.priority
    return 0


def _queue(
    requested: str | None,
    handler: RegisteredHandler | None,
    definition: JobDefinition[Any] | None,
) -> str:
    """A job's queue: the enqueue's (checked), else the handler's (which took the definition's
    when it had none of its own), else the definition's, else ``DEFAULT_QUEUE``."""
    if requested is not None:
        return requested if requested == DEFAULT_QUEUE else check_queue(requested)
    if handler is not None and handler.options.queue is not None:
        return handler.options.queue
    if definition is not None and definition.queue is not None:
        return definition.queue
    return DEFAULT_QUEUE


def _definition_of(
    type_or_definition: str | JobDefinition[Any], handler: RegisteredHandler | None
) -> JobDefinition[Any] | None:
    """The definition the payload is validated against: the one given, else (typed by name)
    the handler's, as ``JobHandlerRegistry.definition_of`` says."""
    if isinstance(type_or_definition, JobDefinition):
        return type_or_definition
    return handler.options.definition if handler is not None else None


def _definition_timeout(definition: JobDefinition[Any] | None) -> int | None:
    return definition.timeout_ms if definition is not None else None


def _both(delay_ms: int, run_at: object) -> JobOptionError:
    return JobOptionError(
        f"give delay_ms or run_at, not both (got delay_ms={delay_ms} and run_at={run_at!r})",
        option="run_at",
        value=run_at,
    )


def type_name(value: object) -> str:
    return type(value).__name__
