"""The driver conformance suite on SQLAlchemyJobStore: a SQLite file and PostgreSQL."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from jobs.testing import OPERATIONS_CASES, DriverConformance, DriverHarness
from tests.integration.sql_store.support import StoreHarness


class TestSQLAlchemyJobStore(DriverConformance):
    skipped_cases = dict.fromkeys(
        OPERATIONS_CASES, "operations SPI not yet implemented on this driver (issue 10)"
    )

    @pytest.fixture(
        params=[
            pytest.param("sqlite", id="sqlite"),
            pytest.param("postgres", id="postgres", marks=pytest.mark.postgres),
        ]
    )
    async def driver_harness(
        self, request: pytest.FixtureRequest, tmp_path: Path
    ) -> AsyncIterator[DriverHarness]:
        harness = StoreHarness(request.param, tmp_path)
        yield harness
        await harness.cleanup()
