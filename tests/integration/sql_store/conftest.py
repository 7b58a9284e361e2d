"""Fixtures for the SQL job store tests: one harness per database, cleaned up after."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from .support import StoreHarness


@pytest.fixture(
    params=[
        pytest.param("sqlite", id="sqlite"),
        pytest.param("postgres", id="postgres", marks=pytest.mark.postgres),
    ]
)
async def harness(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[StoreHarness]:
    store_harness = StoreHarness(request.param, tmp_path)
    yield store_harness
    await store_harness.cleanup()


@pytest.fixture
async def sqlite_harness(tmp_path: Path) -> AsyncIterator[StoreHarness]:
    store_harness = StoreHarness("sqlite", tmp_path)
    yield store_harness
    await store_harness.cleanup()


@pytest.fixture
async def pg_harness(tmp_path: Path) -> AsyncIterator[StoreHarness]:
    store_harness = StoreHarness("postgres", tmp_path)
    yield store_harness
    await store_harness.cleanup()
