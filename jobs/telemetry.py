"""Spans and logs of jobs, and the W3C trace context a job carries from its enqueue.

One request, one trace: the producer's span (an HTTP handler, say) is the parent of the
enqueue's PRODUCER span ``jobs.enqueue <type>``, whose context the job stores
(``trace_context``); each execution's CONSUMER span ``jobs.job.<type>`` is its child, in
whatever process claims the job. Through the outbox, the entry stores the appending span's
context and the relay's ``outbox.publish <type>`` span continues it. Attributes follow the
OpenTelemetry messaging conventions where they fit (``messaging.system`` "neverlost", the job
type as destination, the job id as message id). Without an SDK (no tracer provider) no span
is started, and a trace context already current (one propagated into the request) is
carried as it is.
"""

from __future__ import annotations

import os
import traceback
from collections.abc import Sequence
from contextlib import AbstractContextManager, nullcontext
from typing import TYPE_CHECKING, Any

from loguru import logger
from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.environment_variables import OTEL_PYTHON_TRACER_PROVIDER
from opentelemetry.trace import (
    INVALID_SPAN,
    NoOpTracerProvider,
    ProxyTracerProvider,
    Span,
    SpanContext,
    SpanKind,
    Status,
    StatusCode,
)
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from ._compat import loguru_context, tracer_provider_unset
from .redaction import redact_text
from .spi.records import ClaimedJob, JobRequest

if TYPE_CHECKING:
    from .spi.records import OutboxEntry

_tracer = trace.get_tracer("neverlost")
_propagator = TraceContextTextMapPropagator()
_ERROR_TAIL_LINES = 12
MAX_ERROR_CHARS = 4_000
"""The bound of an error's text wherever the library keeps or shows it: a job's stored
``last_error`` (``describe_error``), log lines and span status/attributes (``error_summary``)."""
_CUT = "… ({} characters cut)"
MESSAGING_SYSTEM = "neverlost"
_NO_SDK = (ProxyTracerProvider, NoOpTracerProvider)
_sdk_installed = False
_PROVIDER_FROM_ENV = OTEL_PYTHON_TRACER_PROVIDER in os.environ
"""Read once: OpenTelemetry reads the variable at the first ``get_tracer_provider()``."""


def current_traceparent() -> str | None:
    """The caller's span as a W3C traceparent, or None outside a recorded trace."""
    if not otel_context.get_current():  # nothing attached: no span, none propagated
        return None
    carrier: dict[str, str] = {}
    _propagator.inject(carrier)
    return carrier.get("traceparent")


def parse_traceparent(value: str | None) -> SpanContext | None:
    """The span context a traceparent names, or None if it is absent or malformed."""
    if not value:
        return None
    context = trace.get_current_span(_context_of(value)).get_span_context()
    return context if context.is_valid else None


def _context_of(traceparent: str | None) -> otel_context.Context | None:
    """An OpenTelemetry context whose (remote) parent is ``traceparent``; None: no parent."""
    if not traceparent:
        return None
    return _propagator.extract({"traceparent": traceparent}, context=otel_context.Context())


def _traceparent_of(span: Span) -> str | None:
    carrier: dict[str, str] = {}
    _propagator.inject(carrier, context=trace.set_span_in_context(span))
    return carrier.get("traceparent")


def tracing() -> bool:
    """Whether a tracer provider (an SDK) is installed; without one no span is started at all:
    the API's no-op spans measured about 5x the cost of this check on the enqueue path. A
    provider, once set, stays (OpenTelemetry allows one per process), so that is kept.

    Asked on every enqueue and every attempt, so while none is set the answer comes from the
    API module's global (an attribute read, ``_compat.tracer_provider_unset``) rather than
    ``get_tracer_provider()``, which looks the environment up each time (about 1 us, the
    costliest part of a no-op job's telemetry). Should that private global go in a later API
    version, the public call is made instead.
    """
    global _sdk_installed
    if _sdk_installed:
        return True
    if tracer_provider_unset() and not _PROVIDER_FROM_ENV:
        return False  # none set yet (one set later is seen at the next call)
    _sdk_installed = not isinstance(trace.get_tracer_provider(), _NO_SDK)
    return _sdk_installed


UNTRACED: AbstractContextManager[Span] = nullcontext(INVALID_SPAN)
"""The scope of an enqueue without an SDK: no span started, none made current (reusable)."""


def enqueue_span(job_type: str) -> AbstractContextManager[Span]:
    """The PRODUCER span ``jobs.enqueue <type>``, current inside the block (the request built
    there carries it); ``enqueued`` records the outcome."""
    if not tracing():
        return UNTRACED
    return _tracer.start_as_current_span(
        f"jobs.enqueue {job_type}",
        kind=SpanKind.PRODUCER,
        attributes={
            "messaging.system": MESSAGING_SYSTEM,
            "messaging.operation.type": "send",
            "messaging.operation.name": "enqueue",
            "messaging.destination.name": job_type,
            "job.type": job_type,
        },
    )


def enqueue_many_span(count: int) -> AbstractContextManager[Span]:
    """The PRODUCER span ``jobs.enqueue`` of a batch; jobs that carry a context of their own
    (an outbox entry's) are linked by ``enqueued_batch``."""
    if not tracing():
        return nullcontext(INVALID_SPAN)
    return _tracer.start_as_current_span(
        "jobs.enqueue",
        kind=SpanKind.PRODUCER,
        attributes={
            "messaging.system": MESSAGING_SYSTEM,
            "messaging.operation.type": "send",
            "messaging.operation.name": "enqueue_many",
            "messaging.batch.message_count": count,
        },
    )


def enqueued(span: Span, request: JobRequest, job_id: str | None) -> None:
    if span.is_recording():
        span.set_attribute("messaging.message.id", request.id)
        span.set_attribute("job.id", request.id)
        if job_id is None:
            span.set_attribute("job.key_taken", True)


def enqueued_batch(span: Span, requests: Sequence[JobRequest]) -> None:
    if not span.is_recording():
        return
    own = trace.get_current_span().get_span_context()
    types = {request.type for request in requests}
    if len(types) == 1:
        (job_type,) = types
        span.update_name(f"jobs.enqueue {job_type}")
        span.set_attribute("messaging.destination.name", job_type)
    for request in requests[:128]:
        origin = parse_traceparent(request.trace_context)
        if origin is not None and origin.span_id != own.span_id:
            span.add_link(origin)


def start_publish_span(entry: OutboxEntry) -> Span:
    """The relay's span ``outbox.publish <type>``: a child of the span that appended the entry
    (its ``trace_context``), so the request's trace goes on through the relay."""
    if not tracing():
        return INVALID_SPAN
    return _tracer.start_span(
        f"outbox.publish {entry.type}",
        context=_context_of(entry.trace_context),
        kind=SpanKind.INTERNAL,
        attributes={
            "outbox.entry.id": entry.id,
            "outbox.entry.type": entry.type,
            "outbox.entry.attempt": entry.attempts,
        },
    )


def current(span: Span) -> AbstractContextManager[Span]:
    """Make ``span`` current inside the block (it is not ended on exit)."""
    return trace.use_span(span, end_on_exit=False)


def traceparent_for(span: Span, fallback: str | None) -> str | None:
    """What a job published inside ``span`` carries: ``span`` itself when it is recorded (or
    inherited a context), else ``fallback``."""
    return _traceparent_of(span) or fallback


def end_publish_span(span: Span, error: BaseException | None = None) -> None:
    if error is not None and span.is_recording():
        record_error(span, error)
    span.end()


def start_job_span(job: ClaimedJob) -> Span:
    """One CONSUMER span ``jobs.job.<type>`` per execution, a child of the enqueue's span."""
    if not tracing():
        return INVALID_SPAN
    return _tracer.start_span(
        f"jobs.job.{job.type}",
        context=_context_of(job.trace_context),
        kind=SpanKind.CONSUMER,
        attributes={
            "messaging.system": MESSAGING_SYSTEM,
            "messaging.operation.type": "process",
            "messaging.operation.name": "execute",
            "messaging.destination.name": job.type,
            "messaging.message.id": job.id,
            "job.id": job.id,
            "job.type": job.type,
            "job.attempt": job.attempt,
        },
        record_exception=False,
        set_status_on_exception=False,
    )


def activate(span: Span) -> object | None:
    """Make ``span`` current in this task (so handler spans nest under it); a detach token."""
    if not span.get_span_context().is_valid:  # no tracing configured: nothing to nest
        return None
    return otel_context.attach(trace.set_span_in_context(span))


def deactivate(token: object | None) -> None:
    if token is not None:
        otel_context.detach(token)  # type: ignore[arg-type]


def end_span(span: Span, outcome: str, duration_ms: float, error: BaseException | None) -> None:
    if span.is_recording():
        span.set_attribute("job.outcome", outcome)
        span.set_attribute("job.duration_ms", duration_ms)
        if error is not None:
            record_error(span, error)
    span.end()


def record_error(span: Span, error: BaseException) -> None:
    """The span's ``exception`` event and ERROR status, each text cut to ``MAX_ERROR_CHARS``
    with its URLs redacted: a handler's 5 MB message would otherwise make a span of ~10 MB
    (message and stack trace), which OTLP exporters refuse (4 MB)."""
    message = bounded_error_text(str(error))
    stacktrace = bounded_error_text("".join(traceback.format_exception(error)))
    span.add_event(
        "exception",
        {
            "exception.type": type(error).__name__,
            "exception.message": message,
            "exception.stacktrace": stacktrace,
        },
    )
    span.set_status(Status(StatusCode.ERROR, error_summary(error)))


def bounded_error_text(text: str, limit: int = MAX_ERROR_CHARS) -> str:
    """``text`` with its URLs redacted, cut to ``limit`` characters (saying how many went)."""
    shown = redact_text(text[: limit * 2])
    if len(text) <= limit and len(shown) <= limit:
        return shown
    note = _CUT.format(len(text) - limit)
    return shown[: limit - len(note)] + note


def error_summary(error: BaseException) -> str:
    """``Type: message`` for a log line or a span status: URLs redacted, cut to the bound of a
    stored error (``MAX_ERROR_CHARS``)."""
    return bounded_error_text(f"{type(error).__name__}: {error}")


def describe_error(error: BaseException) -> str:
    """``Type: message`` and the tail of the traceback, as kept in a job's ``last_error``: URLs
    redacted, at most ``MAX_ERROR_CHARS``."""
    head = error_summary(error)
    frames = traceback.format_exception(type(error), error, error.__traceback__)
    tail = "".join(frames[1:-1]).rstrip().splitlines()[-_ERROR_TAIL_LINES:]
    text = head if not tail else head + "\n" + "\n".join(tail)
    return bounded_error_text(text)


_LOG_CONTEXT = loguru_context()


def bind_job_logs(job: ClaimedJob) -> None:
    """Log lines written from here on in the calling task carry ``job_id``, ``job_type``,
    ``attempt`` and ``job_key`` (None without a key) (those of the handler in its task or its
    worker thread: the thread runs in a copy of the task's context).

    Called at the start of an attempt's own task, whose context is a copy made for it and
    dropped with it: nothing is reset. What ``logger.contextualize`` does, done directly on its
    context variable: the same log records at a fraction of the cost per attempt (loguru's
    takes a lock twice and runs a generator context manager). Should a loguru version move the
    variable, ``contextualize`` itself is used.
    """
    var = _LOG_CONTEXT
    if var is None:  # pragma: no cover - see _loguru_context
        fields = {"job_id": job.id, "job_type": job.type, "attempt": job.attempt}
        logger.contextualize(**fields, job_key=job.key).__enter__()
        return
    var.set(
        {
            **var.get(),
            "job_id": job.id,
            "job_type": job.type,
            "attempt": job.attempt,
            "job_key": job.key,
        }
    )


def _job_fields(job: ClaimedJob, span: Span | None) -> dict[str, Any]:
    """What a line about an execution carries: the job, and its span's ids when it has one
    (the line is written after the span stopped being current)."""
    fields: dict[str, Any] = {
        "job_id": job.id,
        "job_type": job.type,
        "attempt": job.attempt,
        "job_key": job.key,
    }
    context = span.get_span_context() if span is not None else None
    if context is not None and context.is_valid:
        fields["trace_id"] = format(context.trace_id, "032x")
        fields["span_id"] = format(context.span_id, "016x")
    return fields


def log_retry(
    job: ClaimedJob, max_attempts: int, delay_ms: int, error: BaseException, span: Span | None
) -> None:
    logger.bind(**_job_fields(job, span)).warning(
        "job {} ({}) attempt {}/{} failed, retrying in {} ms: {}",
        job.type,
        job.id,
        job.attempt,
        max_attempts,
        delay_ms,
        error_summary(error),
    )


def log_retry_later(
    job: ClaimedJob, delay_ms: int, error: BaseException, span: Span | None
) -> None:
    """A handler's ``RetryLater``: not a failure, no attempt spent (INFO)."""
    logger.bind(**_job_fields(job, span)).info(
        "job {} ({}) asked to run again in {} ms, its attempt {} not spent: {}",
        job.type,
        job.id,
        delay_ms,
        job.attempt,
        error_summary(error),
    )


def log_failure(
    job: ClaimedJob, max_attempts: int, error: BaseException, span: Span | None
) -> None:
    logger.bind(**_job_fields(job, span)).error(
        "job {} ({}) failed for good after attempt {}/{}: {}",
        job.type,
        job.id,
        job.attempt,
        max_attempts,
        error_summary(error),
    )
