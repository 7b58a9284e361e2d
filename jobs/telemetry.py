"""Spans and logs of job executions, and the trace context a job carries from its enqueue."""

from __future__ import annotations

import traceback

from loguru import logger
from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Link, Span, SpanContext, SpanKind, Status, StatusCode, TraceFlags

from .driver import ClaimedJob

_tracer = trace.get_tracer("jobs")
_ERROR_TAIL_LINES = 12
_ERROR_MAX_CHARS = 4_000


def current_traceparent() -> str | None:
    """The caller's span as a W3C traceparent, or None outside a recorded trace."""
    context = trace.get_current_span().get_span_context()
    if not context.is_valid:
        return None
    return f"00-{context.trace_id:032x}-{context.span_id:016x}-{int(context.trace_flags):02x}"


def parse_traceparent(value: str | None) -> SpanContext | None:
    """The span context a traceparent names, or None if it is absent or malformed."""
    if not value:
        return None
    parts = value.split("-")
    if len(parts) != 4 or len(parts[1]) != 32 or len(parts[2]) != 16:
        return None
    try:
        trace_id, span_id, flags = int(parts[1], 16), int(parts[2], 16), int(parts[3], 16)
    except ValueError:
        return None
    context = SpanContext(trace_id, span_id, is_remote=True, trace_flags=TraceFlags(flags))
    return context if context.is_valid else None


def start_job_span(job: ClaimedJob) -> Span:
    """One INTERNAL span ``jobs.job.<type>`` per execution, linked to the enqueuing trace."""
    origin = parse_traceparent(job.trace_context)
    return _tracer.start_span(
        f"jobs.job.{job.type}",
        kind=SpanKind.INTERNAL,
        links=[Link(origin)] if origin is not None else None,
        attributes={"job.id": job.id, "job.type": job.type, "job.attempt": job.attempt},
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
            span.record_exception(error)
            span.set_status(Status(StatusCode.ERROR, f"{type(error).__name__}: {error}"))
    span.end()


def describe_error(error: BaseException) -> str:
    """``Type: message`` and the tail of the traceback, as kept in a job's ``last_error``."""
    head = f"{type(error).__name__}: {error}"
    frames = traceback.format_exception(type(error), error, error.__traceback__)
    tail = "".join(frames[1:-1]).rstrip().splitlines()[-_ERROR_TAIL_LINES:]
    text = head if not tail else head + "\n" + "\n".join(tail)
    return text[:_ERROR_MAX_CHARS]


def log_retry(job: ClaimedJob, max_attempts: int, delay_ms: int, error: BaseException) -> None:
    logger.bind(job_id=job.id, job_type=job.type, attempt=job.attempt).warning(
        "job {} ({}) attempt {}/{} failed, retrying in {} ms: {}: {}",
        job.type,
        job.id,
        job.attempt,
        max_attempts,
        delay_ms,
        type(error).__name__,
        error,
    )


def log_failure(job: ClaimedJob, max_attempts: int, error: BaseException) -> None:
    logger.bind(job_id=job.id, job_type=job.type, attempt=job.attempt).error(
        "job {} ({}) failed for good after attempt {}/{}: {}: {}",
        job.type,
        job.id,
        job.attempt,
        max_attempts,
        type(error).__name__,
        error,
    )
