"""The conformance suite against the real Redis: each test in its own namespace."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from jobs.testing import OPERATIONS_CASES, DriverConformance, DriverHarness
from tests.integration.redis.harness import RedisHarness

pytestmark = pytest.mark.redis


class TestRedisDriver(DriverConformance):
    skipped_cases = dict.fromkeys(
        OPERATIONS_CASES, "operations SPI not yet implemented on this driver (issue 10)"
    )

    @pytest.fixture
    async def driver_harness(self) -> AsyncIterator[DriverHarness]:
        harness = RedisHarness()
        yield harness
        await harness.cleanup()
