"""Helpers shared by the tests: waiting on a condition with a deadline, log capture."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from loguru import logger

from jobs.testing.helpers import wait_until

__all__ = ["captured_logs", "wait_until"]


@contextmanager
def captured_logs(level: str = "DEBUG") -> Iterator[list[dict[str, Any]]]:
    """Loguru records (as dicts: level, message, extra) written inside the block."""
    records: list[dict[str, Any]] = []

    def sink(message: Any) -> None:
        record = message.record
        records.append(
            {"level": record["level"].name, "message": record["message"], "extra": record["extra"]}
        )

    handler_id = logger.add(sink, level=level, format="{message}")
    try:
        yield records
    finally:
        logger.remove(handler_id)


def metric_points(reader: Any, name: str) -> dict[frozenset[tuple[str, Any]], Any]:
    """One collection of ``reader`` (an InMemoryMetricReader): instrument ``name``'s points by
    their attributes (a frozenset of pairs); a point is its value, or a histogram's point."""
    found: dict[frozenset[tuple[str, Any]], Any] = {}
    data = reader.get_metrics_data()
    for resource in data.resource_metrics if data is not None else ():
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                if metric.name != name:
                    continue
                for point in metric.data.data_points:
                    value = getattr(point, "value", point)
                    found[frozenset((point.attributes or {}).items())] = value
    return found


def attrs(**attributes: Any) -> frozenset[tuple[str, Any]]:
    """The key of ``metric_points`` for these attributes (dots spelled as underscores)."""
    return frozenset((key.replace("_", "."), value) for key, value in attributes.items())
