"""One attempt of a claimed job: call the handler, keep its lease alive, settle the outcome.

The handler runs in its own task (or worker thread). The attempt waits for it, bounded by the
timeout: at the timeout the handler is cancelled and its ``ctx.signal`` set, and if it has not
stopped ``timeout_grace_ms`` later the attempt is settled without it. Heartbeats are timers on
the runner's loop; before settling, the attempt waits for a heartbeat in flight, so a late beat
never lands after the job was settled.
"""

from __future__ import annotations

import asyncio
import contextvars
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal

from loguru import logger

from .context import AbortSignal, JobContext
from .driver import ClaimedJob
from .errors import JobTimeoutError, LeaseExpiredError, PayloadValidationError
from .payload import decode_payload
from .telemetry import describe_error, end_span, job_span, log_failure, log_retry

if TYPE_CHECKING:
    from .handlers import RegisteredHandler
    from .runner import JobRunner

Outcome = Literal["completed", "retry", "failed", "lease_lost"]


class Attempt:
    """A claimed job's execution, from handler call to settle."""

    __slots__ = (
        "_beat_handle",
        "_beat_task",
        "_done",
        "_grace_handle",
        "_handler_future",
        "_settling",
        "_timeout_handle",
        "handler",
        "job",
        "lease_lost",
        "runner",
        "signal",
        "timed_out",
    )

    def __init__(self, runner: JobRunner, job: ClaimedJob, handler: RegisteredHandler) -> None:
        self.runner = runner
        self.job = job
        self.handler = handler
        self.signal = AbortSignal()
        self.timed_out = False
        self.lease_lost = False
        self._settling = False
        self._done: asyncio.Future[None] | None = None
        self._handler_future: asyncio.Future[Any] | None = None
        self._timeout_handle: asyncio.TimerHandle | None = None
        self._grace_handle: asyncio.TimerHandle | None = None
        self._beat_handle: asyncio.TimerHandle | None = None
        self._beat_task: asyncio.Task[None] | None = None

    @property
    def max_attempts(self) -> int:
        return self.handler.options.max_attempts or self.job.max_attempts

    async def run(self) -> Outcome:
        started = time.perf_counter()
        with job_span(self.job) as span:
            self._schedule_beat()
            try:
                error = await self._call_handler()
            except asyncio.CancelledError:
                self._abandon("shutdown")
                raise
            finally:
                await self._stop_heartbeats()
            outcome = await self._settle(error)
            end_span(span, outcome, (time.perf_counter() - started) * 1000, error)
        return outcome

    # -- the handler ---------------------------------------------------------------------------

    async def _call_handler(self) -> BaseException | None:
        """Run the handler to its end, its timeout, or its lost lease; the error, if any."""
        try:
            future = self._start_handler()
        except Exception as exc:  # the payload does not fit, or the call itself failed
            return exc
        loop = asyncio.get_running_loop()
        self._handler_future = future
        self._done = loop.create_future()
        future.add_done_callback(self._on_handler_done)
        timeout_ms = self.handler.options.timeout_ms or self.job.timeout_ms
        if timeout_ms is not None:
            self._timeout_handle = loop.call_later(timeout_ms / 1000, self._on_timeout)
        await self._done
        if self.lease_lost:
            return LeaseExpiredError(f"job {self.job.id} lost its lease while running")
        if not future.done():
            self._abandon("timeout")
        if self.timed_out:
            return JobTimeoutError(f"job {self.job.type!r} timed out after {timeout_ms} ms")
        if future.cancelled():
            return asyncio.CancelledError("the handler was cancelled")
        return future.exception()

    def _start_handler(self) -> asyncio.Future[Any]:
        payload = decode_payload(self.job.payload)
        definition = self.handler.options.definition
        if definition is not None:
            payload = definition.validate(payload)
        args: tuple[Any, ...] = (payload,)
        if self.handler.takes_context:
            job = self.job
            context = JobContext(job.id, job.type, job.attempt, self.max_attempts, self.signal)
            args = (payload, context)
        function = self.handler.function
        loop = asyncio.get_running_loop()
        if self.handler.is_async:
            return loop.create_task(function(*args))
        return loop.run_in_executor(
            self.runner.executor, _call_in, contextvars.copy_context(), function, args
        )

    def _on_handler_done(self, _: asyncio.Future[Any]) -> None:
        for handle in (self._timeout_handle, self._grace_handle):
            if handle is not None:
                handle.cancel()
        self._release()

    def _on_timeout(self) -> None:
        self.timed_out = True
        self._interrupt("timeout")

    def _interrupt(self, reason: str) -> None:
        """Cancel the handler and set its signal; settle without it after the grace period."""
        self.signal.set(reason)
        future = self._handler_future
        if future is None or future.done():
            return
        future.cancel()
        grace_s = self.runner.settings.timeout_grace_ms / 1000
        self._grace_handle = asyncio.get_running_loop().call_later(grace_s, self._release)

    def _release(self) -> None:
        if self._done is not None and not self._done.done():
            self._done.set_result(None)

    def _abandon(self, reason: str) -> None:
        """Leave a handler that will not stop to finish on its own; the runner keeps watch."""
        self.signal.set(reason)
        future = self._handler_future
        if future is not None and not future.done():
            future.cancel()
            self.runner.track_abandoned(self.job, future)

    # -- heartbeats ----------------------------------------------------------------------------

    def _schedule_beat(self) -> None:
        delay_s = self.runner.heartbeat_ms / 1000
        self._beat_handle = asyncio.get_running_loop().call_later(delay_s, self._beat)

    def _beat(self) -> None:
        if not self._settling:
            self._beat_task = asyncio.get_running_loop().create_task(self._send_beat())

    async def _send_beat(self) -> None:
        job = self.job
        try:
            held = await self.runner.driver.heartbeat(job.id, job.lease_token, self.runner.lease_ms)
        except Exception as exc:
            logger.bind(job_id=job.id).warning(
                "heartbeat for job {} failed, trying again: {}: {}", job.id, type(exc).__name__, exc
            )
            held = True
        if not held:
            logger.bind(job_id=job.id, job_type=job.type).warning(
                "job {} ({}) lost its lease; its handler is cancelled", job.type, job.id
            )
            self.lease_lost = True
            self._interrupt("lease lost")
        elif not self._settling:
            self._schedule_beat()

    async def _stop_heartbeats(self) -> None:
        self._settling = True
        if self._beat_handle is not None:
            self._beat_handle.cancel()
        beat = self._beat_task
        if beat is not None and not beat.done():
            await asyncio.shield(beat)

    # -- settle --------------------------------------------------------------------------------

    async def _settle(self, error: BaseException | None) -> Outcome:
        job, driver, runner = self.job, self.runner.driver, self.runner
        if self.lease_lost:
            return "lease_lost"
        if error is None:
            done = await runner.call_store(lambda: driver.complete(job.id, job.lease_token))
            return "completed" if done else self._refused()
        text = describe_error(error)
        if isinstance(error, PayloadValidationError) or job.attempt >= self.max_attempts:
            log_failure(job, self.max_attempts, error)
            failed = await runner.call_store(
                lambda: driver.fail(job.id, job.lease_token, error=text)
            )
            return "failed" if failed else self._refused()
        delay_ms = (self.handler.options.backoff or runner.backoff)(job.attempt)
        log_retry(job, self.max_attempts, delay_ms, error)
        retried = await runner.call_store(
            lambda: driver.retry(job.id, job.lease_token, delay_ms=delay_ms, error=text)
        )
        return "retry" if retried else self._refused()

    def _refused(self) -> Outcome:
        logger.bind(job_id=self.job.id).warning(
            "job {} ({}) was reclaimed before it settled; this attempt's result is dropped",
            self.job.type,
            self.job.id,
        )
        return "lease_lost"


def _call_in(
    context: contextvars.Context, function: Callable[..., Any], args: tuple[Any, ...]
) -> Any:
    return context.run(function, *args)

