"""Fixtures for every test package."""

from __future__ import annotations

import sys
from collections.abc import Iterator

import pytest
from loguru import logger
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

# Loguru's default sink keeps the sys.stderr of import time, which pytest may have swapped for a
# capture file it closes later; look sys.stderr up at each write instead.
logger.remove()
logger.add(lambda message: sys.stderr.write(message), level="DEBUG")

_EXPORTER = InMemorySpanExporter()
_PROVIDER: TracerProvider | None = None


@pytest.fixture
def span_exporter() -> Iterator[InMemorySpanExporter]:
    """Finished spans of the test. The SDK provider is installed once per process."""
    global _PROVIDER
    if _PROVIDER is None:
        _PROVIDER = TracerProvider()
        _PROVIDER.add_span_processor(SimpleSpanProcessor(_EXPORTER))
        trace.set_tracer_provider(_PROVIDER)
    _EXPORTER.clear()
    yield _EXPORTER
    _EXPORTER.clear()
