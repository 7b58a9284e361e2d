"""The driver conformance suite on SQLAlchemyJobStore: a SQLite file, PostgreSQL, and
PostgreSQL through PgBouncer in transaction mode (the URL of the docs' "Run behind PgBouncer")."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from jobs.testing import DriverConformance, DriverHarness
from tests.integration.sql_store.support import StoreHarness


class TestSQLAlchemyJobStore(DriverConformance):
    @pytest.fixture(
        params=[
            pytest.param("sqlite", id="sqlite"),
            pytest.param("postgres", id="postgres", marks=pytest.mark.postgres),
            pytest.param(
                "pgbouncer", id="pgbouncer", marks=[pytest.mark.postgres, pytest.mark.pgbouncer]
            ),
        ]
    )
    async def driver_harness(
        self, request: pytest.FixtureRequest, tmp_path: Path
    ) -> AsyncIterator[DriverHarness]:
        url = request.getfixturevalue("pgbouncer").url if request.param == "pgbouncer" else None
        harness = StoreHarness(request.param, tmp_path, url=url)
        yield harness
        await harness.cleanup()
