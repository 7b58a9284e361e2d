"""Driver factories for the benchmarks: each yields a driver on a fresh, empty store.

The servers are the ones the tests use (127.0.0.1, or TEST_POSTGRES_URL / TEST_REDIS_URL);
every store is a fresh table prefix or namespace, removed afterwards.
"""

from __future__ import annotations

import os
import tempfile
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path

from jobs import InProcessJobDriver, JobDriver

POSTGRES_URL = os.environ.get(
    "TEST_POSTGRES_URL", "postgresql+asyncpg://postgres@127.0.0.1:5432/test"
)
REDIS_URL = os.environ.get("TEST_REDIS_URL", "redis://127.0.0.1:6379/0")

DriverFactory = Callable[[], AbstractAsyncContextManager[JobDriver]]


@asynccontextmanager
async def inprocess() -> AsyncIterator[JobDriver]:
    driver = InProcessJobDriver()
    try:
        yield driver
    finally:
        await driver.close()


@asynccontextmanager
async def sqlite() -> AsyncIterator[JobDriver]:
    from orm_sqlalchemy import SQLAlchemyJobStore

    with tempfile.TemporaryDirectory() as scratch:
        store = SQLAlchemyJobStore(f"sqlite+aiosqlite:///{Path(scratch) / 'bench.db'}")
        try:
            yield store
        finally:
            await store.close()


@asynccontextmanager
async def postgres() -> AsyncIterator[JobDriver]:
    from orm_sqlalchemy import SQLAlchemyJobStore, create_engine
    from orm_sqlalchemy.factory import drop_prefixed_tables

    prefix = f"bench{uuid.uuid4().hex[:8]}_"
    store = SQLAlchemyJobStore(POSTGRES_URL, table_prefix=prefix)
    try:
        yield store
    finally:
        await store.close()
        engine = create_engine(POSTGRES_URL)
        async with engine.begin() as conn:
            await drop_prefixed_tables(conn, prefix)
        await engine.dispose()


@asynccontextmanager
async def redis(namespace: str | None = None) -> AsyncIterator[JobDriver]:
    from redis.asyncio import Redis

    from redis_jobs import RedisJobDriver, delete_namespace

    namespace = namespace or f"bench-{uuid.uuid4().hex[:8]}"
    driver = RedisJobDriver(url=REDIS_URL, namespace=namespace)
    try:
        yield driver
    finally:
        await driver.close()
        client = Redis.from_url(REDIS_URL)
        await delete_namespace(client, namespace)
        await client.aclose()


FACTORIES: dict[str, DriverFactory] = {
    "inprocess": inprocess,
    "sqlite": sqlite,
    "postgres": postgres,
    "redis": redis,
}
