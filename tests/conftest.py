"""Fixtures for every test package."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from loguru import logger
from opentelemetry import metrics, trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from jobs import enable_logging
from tests.integration.redis.topologies import PrivateCluster
from tests.pgbouncer import PgBouncer, running_pgbouncer
from tests.stores import STORE_KINDS, StoreTarget

# Loguru's default sink keeps the sys.stderr of import time, which pytest may have swapped for a
# capture file it closes later; look sys.stderr up at each write instead. The library's lines
# are off by default (jobs.logs); the tests read them, so they are on here.
logger.remove()
logger.add(lambda message: sys.stderr.write(message), level="DEBUG")
enable_logging()

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


_METRIC_READER = InMemoryMetricReader()
_METER_PROVIDER: MeterProvider | None = None


@pytest.fixture
def metric_reader() -> InMemoryMetricReader:
    """The SDK's in-memory reader, on a meter provider installed once per process.

    Sums are cumulative over the process: tests use job types of their own.
    """
    global _METER_PROVIDER
    if _METER_PROVIDER is None:
        _METER_PROVIDER = MeterProvider(metric_readers=[_METRIC_READER])
        metrics.set_meter_provider(_METER_PROVIDER)
    return _METRIC_READER


# A multi-process test through the PgBouncer costs 5-9 s; `make test-all` runs those. The
# conformance suite and tests/integration/topologies cover the PgBouncer in `make test`.
PROCESS_STORE_KINDS = [
    pytest.param(*kind.values, id=kind.id, marks=[*kind.marks, pytest.mark.slow])
    if kind.id == "pgbouncer"
    else kind
    for kind in STORE_KINDS
]


@pytest.fixture(params=PROCESS_STORE_KINDS)
async def store_target(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[StoreTarget]:
    """A fresh durable store (SQLite file, PostgreSQL prefix, Redis namespace), dropped after."""
    url = request.getfixturevalue("pgbouncer").url if request.param == "pgbouncer" else None
    target = StoreTarget.fresh(request.param, tmp_path, url=url)
    yield target
    await target.drop()


@pytest.fixture(scope="session")
def pgbouncer() -> Iterator[PgBouncer]:
    """A private PgBouncer in transaction mode in front of the test database, for the session."""
    with running_pgbouncer() as bouncer:
        yield bouncer


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrivateCluster]:
    """A private Redis Cluster (3 masters, a replica each) on loopback ports, one per test
    module that asks for it, stopped after the module."""
    started = PrivateCluster(tmp_path_factory.mktemp("cluster"))
    try:
        yield started
    finally:
        started.stop()
