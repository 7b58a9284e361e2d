"""The conformance suite against the real Redis: each test in its own namespace."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from jobs.testing import DriverConformance, DriverHarness
from tests.integration.redis.harness import RedisHarness

pytestmark = pytest.mark.redis


class TestRedisDriver(DriverConformance):
    @pytest.fixture
    async def driver_harness(self) -> AsyncIterator[DriverHarness]:
        harness = RedisHarness()
        yield harness
        await harness.cleanup()
