"""Fixtures of the Redis driver tests: a harness per test (its own namespace), an admin client."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from redis.asyncio import Redis

from .harness import REDIS_URL, RedisHarness


@pytest.fixture
async def harness() -> AsyncIterator[RedisHarness]:
    harness = RedisHarness()
    yield harness
    await harness.cleanup()


@pytest.fixture
async def admin() -> AsyncIterator[Redis]:
    """A client for inspecting and arranging keys behind the driver's back."""
    client = Redis.from_url(REDIS_URL)
    yield client
    await client.aclose()
