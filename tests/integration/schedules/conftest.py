"""Stores for the multi-process schedule tests: a SQLite file, a PostgreSQL table, Redis.

PostgreSQL and Redis must be running (127.0.0.1:5432 database ``test``, 127.0.0.1:6379); the
tests fail, not skip, without them. Each test uses its own table prefix or namespace and
removes it afterwards.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from redis.asyncio import Redis
from sqlalchemy import text

from orm_sqlalchemy.engine import create_engine
from tests.integration.redis.harness import REDIS_URL, delete_namespace
from tests.integration.sql_store.support import POSTGRES_URL

from .fleet import Fleet
from .support import StoreSpec, unique_prefix

BACKENDS = [
    pytest.param("sqlite", id="sqlite"),
    pytest.param("postgres", id="postgres", marks=pytest.mark.postgres),
    pytest.param("redis", id="redis", marks=pytest.mark.redis),
]


async def _drop(spec: StoreSpec) -> None:
    if spec.backend == "redis":
        client = Redis.from_url(spec.url)
        try:
            await delete_namespace(client, spec.prefix)
        finally:
            await client.aclose()
    elif spec.backend == "postgres":
        engine = create_engine(spec.url)
        try:
            async with engine.begin() as conn:
                await conn.execute(text(f'DROP TABLE IF EXISTS "{spec.prefix}queue"'))
        finally:
            await engine.dispose()


@pytest.fixture(params=BACKENDS)
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[StoreSpec]:
    backend: str = request.param
    url = {
        "sqlite": f"sqlite+aiosqlite:///{tmp_path / 'jobs.db'}",
        "postgres": POSTGRES_URL,
        "redis": REDIS_URL,
    }[backend]
    spec = StoreSpec(backend, url, unique_prefix())
    yield spec
    await _drop(spec)


@pytest.fixture
async def fleet(tmp_path: Path) -> AsyncIterator[Fleet]:
    servers = Fleet(tmp_path)
    yield servers
    servers.kill_all()
    await servers.reap()
