"""One attempt of a claimed job: call the handler, decide the outcome, have it settled.

The handler runs inside the attempt's own task (sync handlers in a worker thread, awaited from
it). At the timeout the task is cancelled and ``ctx.signal`` set; a handler that swallows the
cancellation is given ``timeout_grace_ms``, after which the attempt is *detached*: its
``on_detach`` callback (the runner) settles the job without it. A heartbeat that finds the
lease gone (``leases.LeaseKeeper``) interrupts the handler the same way and nothing is settled:
the job belongs to its new holder, or an operator cancelled it (``ctx.signal.reason`` says
which). A reclaimed job (its worker died) whose attempt is past its handler's
``max_attempts``, or whose stalls are past its handler's ``max_stalls``, fails without
running: the handler's options govern wherever the job was enqueued (the store judged by the
values stored with the job). A pending job runs whatever its attempt: an operator's retry
gives a failed job exactly one more. A
``RetryLater`` retries without spending the attempt: it is not a failure of the handler. Log
lines written by the handler carry job_id, job_type, attempt and job_key
(``telemetry.bind_job_logs``: what loguru's ``contextualize`` sets), and the retry and failure
lines the execution span's trace_id and span_id. The store calls themselves go through
``settling.Settler``. An attempt knows the services it is given (``AttemptServices``), never
the runner.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import inspect
import time
from collections.abc import Callable, Mapping
from concurrent.futures import Executor, Future
from dataclasses import dataclass
from types import CoroutineType, MappingProxyType
from typing import TYPE_CHECKING, Any, Literal, cast

from loguru import logger

from .clock import to_datetime
from .context import AbortSignal, JobContext
from .counters import OutcomeTally
from .errors import (
    HandlerExitError,
    JobOptionError,
    JobTimeoutError,
    LeaseExpiredError,
    PayloadValidationError,
    PermanentError,
    RetryLater,
    StalledTooOftenError,
)
from .leases import Lease, LeaseKeeper
from .metrics import metering, record_execution
from .options import MAX_DELAY_MS, check_delay_ms
from .payload import decode_payload
from .progress import ProgressReporter
from .results import DEFAULT_MAX_RESULT_BYTES, encode_result
from .retry import DEFAULT_BACKOFF, Backoff
from .settling import Settler
from .spi.driver import ProgressReports
from .spi.inbox import AttemptSettlement, JobInbox, SyncJobInbox
from .spi.records import ClaimedJob, stalled_error
from .telemetry import (
    activate,
    bind_job_logs,
    deactivate,
    describe_error,
    end_span,
    log_failure,
    log_retry,
    log_retry_later,
    start_job_span,
    tracing,
)

if TYPE_CHECKING:
    from opentelemetry.trace import Span

    from .handlers import RegisteredHandler

_NO_PARENTS: Mapping[str, Any] = MappingProxyType({})
"""``ctx.parent_results`` of a job without parents (shared, never written)."""

Outcome = Literal["completed", "retry", "failed", "lease_lost", "cancelled", "detached"]


@dataclass(frozen=True, slots=True, kw_only=True)
class AttemptServices:
    """What every attempt of one runner shares."""

    settler: Settler
    leases: LeaseKeeper
    executor: Executor
    backoff: Backoff
    timeout_grace_ms: int
    default_timeout_ms: int | None = None
    """The timeout of handlers without one of their own (``JobsSettings.default_timeout_ms``);
    enforced by the runner's sweep (``Attempt.overdue``), not by a timer per attempt."""
    on_detach: Callable[[Attempt], None]
    on_handler_done: Callable[[Attempt], None] = lambda attempt: None
    """Called when the handler returned (before the settle): its slot may take the next job."""
    tally: OutcomeTally | None = None
    """Where the outcome and runtime of each execution are counted (``jobs.counters``)."""
    max_result_bytes: int = DEFAULT_MAX_RESULT_BYTES
    """The bound on a handler's return value as JSON text (``jobs.results``)."""
    progress_store: ProgressReports | None = None
    """The driver, where it keeps progress (``ctx.progress``)."""


class Attempt:
    """A claimed job's execution, from handler call to settle."""

    __slots__ = (
        "_grace_handle",
        "_own_timeout",
        "_settling",
        "_timeout_handle",
        "detached",
        "handler",
        "interrupted_at",
        "job",
        "lease",
        "parent_results",
        "reporter",
        "result",
        "services",
        "settlement",
        "signal",
        "span",
        "started",
        "task",
        "thread",
        "timed_out",
        "timeout_ms",
    )

    def __init__(
        self,
        job: ClaimedJob,
        handler: RegisteredHandler,
        services: AttemptServices,
        lease: Lease,
    ) -> None:
        self.services = services
        self.job = job
        self.handler = handler
        self.signal = AbortSignal()
        own = handler.options.timeout_ms or job.timeout_ms
        self._own_timeout = own is not None
        self.timeout_ms = own if own is not None else services.default_timeout_ms
        """The handler's option, else the request's (a definition's is the handler's), else
        the runner's default."""
        self.task: asyncio.Task[Outcome] | None = None
        self.thread: Future[Any] | None = None
        """A sync handler's call in the executor: it may outlive the attempt (a thread cannot
        be cancelled), and holds its slot until it returns."""
        self.interrupted_at: float | None = None
        """When the handler was interrupted (``time.perf_counter()``): a timeout, a lost lease,
        an operator's cancel."""
        self.span: Span | None = None
        self.timed_out = False
        self.lease = lease
        """Held since the claim (kept while the job waited for a slot, if it was prefetched)."""
        lease.on_lost = self._interrupt
        self.detached = False
        self._settling = False
        self.started = 0.0
        self.reporter: ProgressReporter | None = None
        self.parent_results: Mapping[str, Any] = _NO_PARENTS
        self.result: str | None = None
        """The handler's return value as JSON text (None: it returned None)."""
        """When the handler was called (``time.perf_counter()``); 0 before."""
        self._timeout_handle: asyncio.TimerHandle | None = None
        self._grace_handle: asyncio.TimerHandle | None = None
        self.settlement: AttemptSettlement | None = None
        """Made with the handler's context: an inbox may complete the job in the app's
        transaction through it (``jobs.spi.inbox``)."""

    @property
    def lease_lost(self) -> bool:
        return self.lease.lost

    @property
    def handler_running(self) -> bool:
        """Whether the handler's code still runs after its attempt was settled without it: a
        sync handler's thread, or a detached handler's task. It keeps its slot meanwhile."""
        thread = self.thread
        if thread is not None:
            return not thread.done()
        task = self.task
        return self.detached and task is not None and not task.done()

    @property
    def max_attempts(self) -> int:
        return self.handler.options.max_attempts or self.job.max_attempts

    @property
    def attempt_limit(self) -> int:
        """The limit a log line shows beside the attempt: ``max_attempts``, or, for an attempt
        past it (only an operator's retry runs one: it grants one more, ``max_attempts =
        attempts + 1`` on the job), the job's own, as ``jobs show`` and the dashboard say."""
        limit = self.max_attempts
        return self.job.max_attempts if self.job.attempt > limit else limit

    async def run(self) -> Outcome:
        """The body of the attempt's task."""
        self.started = time.perf_counter()
        job, lease = self.job, self.lease
        span = self.span = start_job_span(job) if tracing() else None
        if job.reclaimed and self._past_handler_limits():
            self.services.leases.release(lease)
            return await self._fail_unrun()
        token = activate(span) if span is not None else None
        if self._own_timeout and self.timeout_ms is not None:
            self._timeout_handle = asyncio.get_running_loop().call_later(
                self.timeout_ms / 1000, self._on_timeout
            )
        try:
            try:
                error = await self._call_handler()
            finally:
                if token is not None:
                    deactivate(token)
                if self._timeout_handle is not None or self._grace_handle is not None:
                    self._cancel_timers()
                thread = self.thread
                if thread is None or thread.done():  # else its slot frees when it returns
                    self.services.on_handler_done(self)
            if self.detached:  # settled through on_detach after the grace period
                return "detached"
            return await self.finish(error)
        finally:
            if not (self.detached or self._settling):  # finish() releases it itself
                self.services.leases.release(lease)

    def _past_handler_limits(self) -> bool:
        """The reclaimed job's attempt is past its handler's ``max_attempts`` (it ran under
        another deploy's handler), or its stalls past the handler's ``max_stalls`` (the store
        judged by the values stored with the job)."""
        max_stalls = self.handler.options.max_stalls
        return self.job.attempt > self.max_attempts or (
            max_stalls is not None and self.job.stalls > max_stalls
        )

    async def _call_handler(self) -> BaseException | None:
        """Run the handler; the error that ended it (None when it returned).

        Whatever a handler raises is its attempt's error, ``BaseException`` included
        (``SystemExit`` and ``KeyboardInterrupt`` fail the job for good): the worker keeps
        serving. Only a cancellation of this attempt's task (a ``CancelledError`` while the task
        has a cancel request: a timeout, a lost lease, an operator's cancel, a shutdown) is the
        runner's; a handler raising ``CancelledError`` of its own is an ordinary error.
        """
        result: BaseException | None = None
        try:
            handler = self.handler
            args = (
                await self._arguments_after_parents() if self.job.depends_on else self._arguments()
            )
            bind_job_logs(self.job)
            inbox = handler.options.inbox
            if inbox is not None:
                value = await self._call_in_inbox(inbox, args)
            elif handler.is_async:
                value = handler.function(*args)
                if type(value) is CoroutineType or inspect.isawaitable(value):
                    value = await value
            else:
                self.thread = thread = self.services.executor.submit(
                    _call_in, contextvars.copy_context(), handler.function, args
                )
                value = await asyncio.wrap_future(thread)
            if value is not None:
                await self._keep_returned(value)
        except asyncio.CancelledError as exc:
            task = self.task
            if task is None or not task.cancelling():
                result = exc  # raised by the handler, not a cancellation of this attempt
            else:
                self._watch_thread()
                if not (self.timed_out or self.lease.lost):
                    self._on_shutdown()
                    raise
                task.uncancel()  # the cancellation was ours, and it is handled
        except (SystemExit, KeyboardInterrupt) as exc:
            result = HandlerExitError(exc)
        except _CarriedExit as carried:
            result = carried.error
        except BaseException as exc:
            result = exc
        if self.timed_out or self.lease.lost:
            return self.interruption_error()
        return result

    async def _call_in_inbox(self, inbox: JobInbox, args: tuple[Any, ...]) -> Any:
        """The handler inside ``inbox.once(ctx)`` (a ``def`` one: ``once_sync``, in its
        thread); skipped when an earlier execution of the job committed (the job is then
        completed)."""
        context = args[1] if len(args) > 1 else self._context()
        keep = functools.partial(encode_result, max_bytes=self.services.max_result_bytes)
        if not self.handler.is_async:
            self.thread = thread = self.services.executor.submit(
                _call_in,
                contextvars.copy_context(),
                _call_in_sync_inbox,
                (cast(SyncJobInbox, inbox), context, self.handler.function, args, keep),
            )
            await asyncio.wrap_future(thread)
        else:
            async with inbox.once(context) as first:
                if not first:
                    _log_skipped(context)
                    return None
                value = self.handler.function(*args)
                while value is not None and inspect.isawaitable(value):
                    value = await value
                _keep_in_block(context, value, keep)
        self.result = None if context.settlement is None else context.settlement.result
        return None

    async def _keep_returned(self, value: Any) -> None:
        """What the handler returned: awaited if awaitable, then encoded as the job's result,
        kept with the job in the completing write (``jobs.results``: a value that cannot be
        kept raises ResultError, the attempt's error)."""
        if inspect.isawaitable(value):
            value = await self._await_returned(value)
        if value is not None:
            self.result = encode_result(value, self.services.max_result_bytes)

    async def _await_returned(self, value: Any) -> Any:
        """A handler call that returned an awaitable (a sync ``def`` returning a coroutine, a
        plain decorator around an ``async def``): await it here, on the runner's loop, saying
        once per handler how to have it called on the loop directly."""
        handler = self.handler
        if "awaitable" not in handler.hinted:
            handler.hinted.add("awaitable")
            logger.bind(job_type=handler.job_type).info(
                "the handler of {} ({}) returned an awaitable it did not await itself; the"
                " runner awaits it on its event loop. A handler that is `async def` all the way"
                " (or marked with inspect.markcoroutinefunction) runs on the loop directly,"
                " without a worker thread",
                handler.job_type,
                handler.source,
            )
        while value is not None and inspect.isawaitable(value):
            value = await value
        return value

    def _arguments(self) -> tuple[Any, ...]:
        """The handler's arguments: the decoded (and validated) payload, and its context."""
        job, handler = self.job, self.handler
        payload = decode_payload(job.payload)
        definition = handler.options.definition
        if definition is not None:
            payload = definition.validate(payload)
        if not handler.takes_context:
            return (payload,)
        return (payload, self._context())

    def _context(self) -> JobContext:
        job = self.job
        run_at = to_datetime(job.run_at_ms) if job.run_at_ms is not None else None
        settlement = self.settlement = AttemptSettlement(
            self.services.settler.driver, job.id, job.lease_token
        )
        # no more beats: the job is no longer active (a partial, not a bound method of the
        # attempt: no reference cycle through the settlement the context holds); a def
        # handler's inbox commits in the handler's thread, so the release goes to the loop
        release = functools.partial(self.services.leases.release, self.lease)
        if self.handler.is_async:
            settlement.on_completed = release
        else:
            settlement.on_completed = _on_loop(asyncio.get_running_loop(), release)
        return JobContext(
            job.id,
            job.type,
            job.attempt,
            self.max_attempts,
            self.signal,
            job.key,
            run_at,
            job.stalls,
            job.lease_token,
            settlement,
            self._reporter(),
            self.parent_results,
        )

    async def _arguments_after_parents(self) -> tuple[Any, ...]:
        """``_arguments`` of a workflow's job, whose context gives its parents' results
        (``ctx.parent_results``: read once per attempt, before the handler)."""
        if self.handler.takes_context:
            driver = self.services.settler.driver
            results: dict[str, Any] = {}
            for parent_id in self.job.depends_on:
                info = await driver.get_job(parent_id)
                if info is not None:
                    results[parent_id] = info.result
            self.parent_results = MappingProxyType(results)
        return self._arguments()

    def _reporter(self) -> ProgressReporter | None:
        store = self.services.progress_store
        if store is None:
            return None
        job = self.job
        reporter = self.reporter = ProgressReporter(store, job.id, job.lease_token)
        return reporter

    # -- interruptions -------------------------------------------------------------------------

    def overdue(self, now: float) -> bool:
        """Whether a handler on the default timeout is past it (``now``: perf_counter), not
        yet interrupted: the runner's sweep then times it out (a timer per attempt would cost
        the hot path ~2.5 us; the default is long, a sweep's lateness does not matter)."""
        timeout_ms = self.timeout_ms
        return (
            not self._own_timeout
            and timeout_ms is not None
            and self.started > 0
            and self.interrupted_at is None
            and not self._settling
            and (now - self.started) * 1000 >= timeout_ms
        )

    def time_out(self) -> None:
        """Interrupt the handler at its timeout: cancelled, ``ctx.signal`` set."""
        self._on_timeout()

    def _on_timeout(self) -> None:
        self.timed_out = True
        self._interrupt("timeout")

    def _interrupt(self, reason: str) -> None:
        """Cancel the handler and set its signal; settle without it after the grace period."""
        self.signal.set(reason)
        task = self.task
        if task is None or task.done() or self._settling:
            return
        if self.interrupted_at is None:
            self.interrupted_at = time.perf_counter()
        task.cancel()
        grace_s = self.services.timeout_grace_ms / 1000
        self._grace_handle = asyncio.get_running_loop().call_later(grace_s, self._detach)

    def _detach(self) -> None:
        """The handler ignored its cancellation: settle the job without waiting for it."""
        if self.task is None or self.task.done() or self._settling:
            return
        self.detached = True
        self.services.on_detach(self)

    def _watch_thread(self) -> None:
        """The attempt was cancelled while its sync handler's thread runs on (a thread cannot
        be cancelled): the handler keeps its slot until the thread returns."""
        thread = self.thread
        if thread is None or thread.done():
            return
        loop = asyncio.get_running_loop()

        def ended(_: Future[Any]) -> None:
            with contextlib.suppress(RuntimeError):  # a closed loop: nothing left to free
                loop.call_soon_threadsafe(self._thread_ended)

        thread.add_done_callback(ended)

    def _thread_ended(self) -> None:
        """The thread of a handler interrupted earlier returned: free its slot."""
        thread = self.thread
        if thread is not None and not thread.cancelled() and thread.exception() is None:
            value = thread.result()
            if inspect.iscoroutine(value):
                value.close()  # made too late to run: never awaited, and no warning about it
        self.services.on_handler_done(self)

    def _on_shutdown(self) -> None:
        self.signal.set("shutdown")
        self._cancel_timers()

    def _cancel_timers(self) -> None:
        for handle in (self._timeout_handle, self._grace_handle):
            if handle is not None:
                handle.cancel()

    # -- settle --------------------------------------------------------------------------------

    async def finish(self, error: BaseException | None) -> Outcome:
        """Wait for a heartbeat in flight, settle, and end the span."""
        self._settling = True
        if self.reporter is not None:
            self.reporter.close()
        leases, lease = self.services.leases, self.lease
        beat = leases.settling(lease)  # released there, unless a beat is in flight
        if beat is not None:
            try:
                await beat
            finally:
                leases.release(lease)
        settlement = self.settlement
        outcome: Outcome
        if settlement is not None and settlement.completed:
            outcome = self._completed_already(error)
        elif error is None and not lease.lost:  # the common case
            completed = await self.services.settler.complete(self.job, self.result)
            outcome = "completed" if completed else self._refused()
        else:
            outcome = await self._settle(error)
        if self.span is None and not metering():
            tally = self.services.tally
            if tally is not None:  # the runtime counted in memory (jobs.counters): no I/O here
                tally.add(self.job.type, outcome, (time.perf_counter() - self.started) * 1000)
            return outcome
        return self._ended(outcome, error)

    def _completed_already(self, error: BaseException | None) -> Outcome:
        """The job was completed in the app's transaction (an inbox): nothing to settle. An
        error raised after that commit cannot undo it; it is logged."""
        if error is not None:
            logger.bind(job_id=self.job.id, job_type=self.job.type).warning(
                "job {} ({}) raised {} after its effects and its completion committed (in the "
                "inbox's transaction); it stays completed",
                self.job.type,
                self.job.id,
                describe_error(error),
            )
        return "completed"

    async def _settle(self, error: BaseException | None) -> Outcome:
        job, settler = self.job, self.services.settler
        if self.lease_lost:
            return "cancelled" if self.signal.reason == "cancelled" else "lease_lost"
        if error is None:
            return "completed" if await settler.complete(job, self.result) else self._refused()
        text = describe_error(error)
        if isinstance(error, RetryLater):  # not a failure: the attempt is not spent
            log_retry_later(job, error.delay_ms, error, self.span)
            retried = await settler.retry(
                job, delay_ms=error.delay_ms, error=text, count_attempt=False
            )
            return "retry" if retried else self._refused()
        final = isinstance(error, PayloadValidationError | PermanentError)
        if final or job.attempt >= self.max_attempts:
            log_failure(job, self.attempt_limit, error, self.span)
            failed = await settler.fail(job, error=text)
            return "failed" if failed else self._refused()
        delay_ms = self._backoff(job.attempt)
        log_retry(job, self.max_attempts, delay_ms, error, self.span)
        retried = await settler.retry(job, delay_ms=delay_ms, error=text)
        return "retry" if retried else self._refused()

    def _backoff(self, attempt: int) -> int:
        """The handler's backoff (else the runner's) for ``attempt``; one that returns no
        valid delay (``jobs.options``: an int up to 10 years) is logged, and the runner's
        default used: a bad backoff must not leave the job unsettled."""
        backoff = self.handler.options.backoff or self.services.backoff
        delay_ms = backoff(attempt)
        if type(delay_ms) is int and 0 <= delay_ms <= MAX_DELAY_MS:
            return delay_ms
        try:
            return check_delay_ms(delay_ms, f"the backoff of handler {self.handler.job_type!r}")
        except JobOptionError as exc:
            logger.bind(job_type=self.handler.job_type).error("{}; retrying by the default", exc)
            return DEFAULT_BACKOFF(attempt)

    async def _fail_unrun(self) -> Outcome:
        """The job is past its handler's limits (lower than those stored with it): fail it
        without running, as the store would have with the handler's values."""
        job = self.job
        error: Exception
        if job.attempt > self.max_attempts:
            error = PermanentError(
                f"attempt {job.attempt} is past the handler's max_attempts "
                f"({self.max_attempts}): not run"
            )
            text = describe_error(error)
        else:
            text = stalled_error(job.stalls, self.handler.options.max_stalls or 0)
            error = StalledTooOftenError(text.partition(": ")[2])
        log_failure(job, self.max_attempts, error, self.span)
        outcome: Outcome = "failed"
        if not await self.services.settler.fail(job, error=text):
            outcome = self._refused()
        return self._ended(outcome, error)

    def _ended(self, outcome: Outcome, error: BaseException | None) -> Outcome:
        span = self.span
        tally = self.services.tally
        if span is None and not metering():
            if tally is not None:
                tally.add(self.job.type, outcome, (time.perf_counter() - self.started) * 1000)
            return outcome
        duration_ms = (time.perf_counter() - self.started) * 1000
        if tally is not None:
            tally.add(self.job.type, outcome, duration_ms)
        if span is not None:
            end_span(span, outcome, duration_ms, error)
        record_execution(self.job.type, outcome, duration_ms)
        return outcome

    def _refused(self) -> Outcome:
        logger.bind(job_id=self.job.id).warning(
            "job {} ({}) was reclaimed before it settled; this attempt's result is dropped",
            self.job.type,
            self.job.id,
        )
        return "lease_lost"

    def interruption_error(self) -> BaseException:
        if self.lease_lost:
            return LeaseExpiredError(f"job {self.job.id} lost its lease while running")
        return JobTimeoutError(f"job {self.job.type!r} timed out after {self.timeout_ms} ms")


class _CarriedExit(Exception):
    """A ``GeneratorExit`` raised by a sync handler, carried out of its thread: raised as it
    is, it would not cross the ``await`` of the executor's future intact (a coroutine takes a
    GeneratorExit for its own closing)."""

    def __init__(self, error: GeneratorExit) -> None:
        super().__init__()
        self.error = error


def _call_in_sync_inbox(
    inbox: SyncJobInbox,
    context: JobContext,
    function: Callable[..., Any],
    args: tuple[Any, ...],
    keep: Callable[[Any], str],
) -> None:
    """A ``def`` handler inside ``inbox.once_sync(ctx)``, in the handler's thread; skipped when
    an earlier execution of the job committed (the job is then completed)."""
    with inbox.once_sync(context) as first:
        if not first:
            _log_skipped(context)
            return
        _keep_in_block(context, function(*args), keep)


def _keep_in_block(context: JobContext, value: Any, keep: Callable[[Any], str]) -> None:
    """The handler's result, encoded before the inbox's block ends, so an inbox completing the
    job in its transaction keeps it (a value that cannot be kept fails the block: ResultError,
    and the effects roll back with it)."""
    settlement = context.settlement
    if value is not None and settlement is not None:
        settlement.result = keep(value)


def _on_loop(loop: asyncio.AbstractEventLoop, callback: Callable[[], None]) -> Callable[[], None]:
    """``callback``, called from any thread, run on ``loop``."""

    def call() -> None:
        loop.call_soon_threadsafe(callback)

    return call


def _log_skipped(context: JobContext) -> None:
    logger.bind(job_id=context.id, job_type=context.type).info(
        "job {} ({}): an earlier execution committed its effects (the inbox has it); the "
        "handler is not run again",
        context.type,
        context.id,
    )


def _call_in(
    context: contextvars.Context, function: Callable[..., Any], args: tuple[Any, ...]
) -> Any:
    try:
        return context.run(function, *args)
    except GeneratorExit as exc:
        raise _CarriedExit(exc) from None
