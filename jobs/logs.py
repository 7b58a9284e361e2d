"""The library's log lines (loguru): off until the application asks for them.

A library should not print into its users' logs unasked, so the packages are disabled at import
(``logger.disable``, loguru's advice for libraries): an application sees its own lines only.
``enable_logging()`` turns on the four packages' lines, and the ``neverlost`` commands call it
(a worker's log is those lines). Lines go to the application's loguru sinks at their levels.

``jobs`` disables ``orm_sqlalchemy`` and ``redis_jobs`` too, as those import ``jobs`` first: a
driver package imported after ``enable_logging()`` (a worker loads its APP after enabling) must
not turn its lines off again. ``framework`` disables itself (``jobs`` imports it first).

``enable_logging()`` also installs a loguru patcher, ``add_trace_ids``, that puts the current
OpenTelemetry span's ``trace_id`` and ``span_id`` (hex, as exporters show them) into a record's
``extra`` when a span is current: in a handler, those of the job's execution span. An
application that configured a patcher of its own keeps it (ours runs after it).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from loguru import logger
from opentelemetry import trace

from ._compat import loguru_patcher

if TYPE_CHECKING:
    from loguru import Record

__all__ = ["LIBRARY_PACKAGES", "add_trace_ids", "disable_logging", "enable_logging"]

LIBRARY_PACKAGES = ("framework", "jobs", "orm_sqlalchemy", "redis_jobs")
"""The packages of the neverlost distribution, as loguru names their records."""


def enable_logging(*, trace_ids: bool = True) -> None:
    """Show the log lines of the four packages; with ``trace_ids``, every record logged while a
    span is current carries its ``trace_id`` and ``span_id`` in ``extra``.

    The lines reach whatever sinks the application added (loguru's default one writes to
    stderr); their levels are the sinks' to filter. Calling it again changes nothing.
    """
    for name in LIBRARY_PACKAGES:
        logger.enable(name)
    if trace_ids:
        _install(add_trace_ids)


def disable_logging() -> None:
    """Turn the four packages' lines off again (as they are at import)."""
    for name in LIBRARY_PACKAGES:
        logger.disable(name)


def add_trace_ids(record: Record) -> None:
    """Loguru patcher: the current span's ``trace_id`` and ``span_id`` into ``extra``."""
    context = trace.get_current_span().get_span_context()
    if context.is_valid:
        extra = record["extra"]
        extra["trace_id"] = format(context.trace_id, "032x")
        extra["span_id"] = format(context.span_id, "016x")


def _install(patcher: Any) -> None:
    """Make ``patcher`` loguru's (global) patcher, after one the application set, once.

    ``logger.configure(patcher=...)`` replaces the patcher; the one in place is read from the
    logger's core (``_compat.loguru_patcher``, not public API: should a loguru version move
    it, ours is set alone).
    """
    previous = loguru_patcher(logger)
    if previous is patcher or getattr(previous, "__wrapped__", None) is patcher:
        return
    if previous is None:
        logger.configure(patcher=patcher)
        return

    def chained(record: Record) -> None:
        previous(record)
        patcher(record)

    chained.__wrapped__ = patcher  # type: ignore[attr-defined]
    logger.configure(patcher=chained)
