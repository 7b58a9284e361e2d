"""Every read of another library's private API in ``jobs``, in one place.

Each is there for speed or to cooperate with the application's own set-up, and each has a
public fallback: should a later version drop the attribute, the behaviour stays right and
only the saving is lost. ``tests/unit/jobs/test_compat.py`` fails loudly when one of them
disappears upstream, so an upgrade that loses a saving is seen, not silent.

- OpenTelemetry's API keeps the tracer and meter providers set by the application in module
  globals (``opentelemetry.trace._TRACER_PROVIDER``,
  ``opentelemetry.metrics._internal._METER_PROVIDER``): None until one is set. Reading them is
  an attribute read; the public ``get_tracer_provider()`` looks the environment up each time
  (about 1 us, the costliest part of a no-op job's telemetry), and the no-op instruments cost
  about 1 us a job. ``tracing()`` and ``metering()`` ask on every enqueue and attempt.
- loguru keeps the patcher ``logger.configure(patcher=...)`` installed on the logger's core
  (``logger._core.patcher``); ``enable_logging`` reads it to chain ours after the application's
  instead of replacing it; and the context variable behind ``logger.contextualize``
  (``loguru._logger.context``), which ``telemetry.bind_job_logs`` sets once per attempt
  instead of entering ``contextualize`` (a context manager) around every handler.
"""

from __future__ import annotations

from contextvars import ContextVar
from typing import Any

from opentelemetry import trace
from opentelemetry.metrics import _internal as _otel_metrics

__all__ = [
    "OTEL_METER_GLOBAL",
    "OTEL_TRACER_GLOBAL",
    "loguru_context",
    "loguru_patcher",
    "meter_provider_unset",
    "tracer_provider_unset",
]

OTEL_TRACER_GLOBAL = hasattr(trace, "_TRACER_PROVIDER")
"""Whether this OpenTelemetry API keeps the set tracer provider in ``trace._TRACER_PROVIDER``."""
OTEL_METER_GLOBAL = hasattr(_otel_metrics, "_METER_PROVIDER")
"""Whether it keeps the set meter provider in ``metrics._internal._METER_PROVIDER``."""


def tracer_provider_unset() -> bool:
    """True when the application has surely set no tracer provider (yet); False when it has, or
    when this API version does not say (then ask ``trace.get_tracer_provider()``)."""
    return OTEL_TRACER_GLOBAL and trace._TRACER_PROVIDER is None


def meter_provider_unset() -> bool:
    """True when the application has surely set no meter provider (yet); False when it has, or
    when this API version does not say (then record: the instruments are right either way)."""
    return OTEL_METER_GLOBAL and _otel_metrics._METER_PROVIDER is None


def loguru_patcher(logger: Any) -> Any:
    """The patcher installed on loguru's ``logger`` (None: none, or a loguru that moved it)."""
    return getattr(getattr(logger, "_core", None), "patcher", None)


def loguru_context() -> ContextVar[dict[str, Any]] | None:
    """The context variable behind loguru's ``contextualize`` (None if a version moved it)."""
    try:
        from loguru import _logger
    except ImportError:  # pragma: no cover - loguru's layout since 0.5
        return None
    context = getattr(_logger, "context", None)
    return context if isinstance(context, ContextVar) else None
