"""The fleet of scheduler processes; the stores come from ``store_target`` (tests/stores.py)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.stores import STORE_KINDS, StoreTarget

from .fleet import Fleet


@pytest.fixture
async def fleet(tmp_path: Path) -> AsyncIterator[Fleet]:
    servers = Fleet(tmp_path)
    yield servers
    servers.kill_all()
    await servers.reap()


@pytest.fixture(params=[kind for kind in STORE_KINDS if kind.id != "pgbouncer"])
async def store_target(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[StoreTarget]:
    """The durable stores, less PostgreSQL through PgBouncer: the worker-process tests run
    there; the scheduler fleet (a minute of five processes) would double its time for no
    statement of its own."""
    target = StoreTarget.fresh(request.param, tmp_path)
    yield target
    await target.drop()
