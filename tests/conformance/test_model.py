"""The SPI model test (jobs.testing.stateful) on every driver: a few examples in ``make test``,
many more in ``make test-all``."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

import pytest

from jobs.testing import DriverConformance
from jobs.testing.stateful import CleanableHarness, run_spi_model
from tests.conformance import test_redis, test_sqlalchemy
from tests.conformance.conftest import InProcessHarness
from tests.integration.redis.harness import RedisHarness
from tests.integration.sql_store.support import StoreHarness


class SqlHarness(StoreHarness):
    """A StoreHarness in a temporary directory of its own, removed at cleanup."""

    def __init__(self, backend: str) -> None:
        self.directory = Path(tempfile.mkdtemp(prefix="spi-model-"))
        super().__init__(backend, self.directory)

    async def cleanup(self) -> None:
        try:
            await super().cleanup()
        finally:
            shutil.rmtree(self.directory, ignore_errors=True)


HARNESSES: dict[str, tuple[Callable[[], CleanableHarness], type[DriverConformance]]] = {
    "inprocess": (InProcessHarness, DriverConformance),
    "sqlite": (lambda: SqlHarness("sqlite"), test_sqlalchemy.TestSQLAlchemyJobStore),
    "postgres": (lambda: SqlHarness("postgres"), test_sqlalchemy.TestSQLAlchemyJobStore),
    "redis": (RedisHarness, test_redis.TestRedisDriver),
}
DRIVERS = [
    pytest.param("inprocess"),
    pytest.param("sqlite"),
    pytest.param("postgres", marks=pytest.mark.postgres),
    pytest.param("redis", marks=pytest.mark.redis),
]


MODELLED_OPERATIONS = (
    "test_cancel_a_pending_job",
    "test_requeue_gives_a_failed_job_exactly_one_more_attempt",
    "test_errors_keep_every_failed_attempt_newest_last",
)
"""The cases of what ``operations=True`` adds to the model: cancel, requeue, JobInfo.errors."""


def implements_operations(suite: type[DriverConformance]) -> bool:
    """The driver's conformance module runs the operations cases the model checks."""
    return not any(case in suite.skipped_cases for case in MODELLED_OPERATIONS)


def check(name: str, max_examples: int, steps: int) -> None:
    make_harness, suite = HARNESSES[name]
    run_spi_model(
        make_harness,
        operations=implements_operations(suite),
        max_examples=max_examples,
        steps=steps,
    )


@pytest.mark.parametrize("name", DRIVERS)
def test_the_driver_follows_the_spi_model(name: str) -> None:
    check(name, max_examples=8, steps=25)


@pytest.mark.slow
@pytest.mark.timeout(1_200)
@pytest.mark.parametrize("name", DRIVERS)
def test_the_driver_follows_the_spi_model_at_length(name: str) -> None:
    check(name, max_examples=100, steps=50)
