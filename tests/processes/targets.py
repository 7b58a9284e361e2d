"""Stores that worker processes and tests share: a SQLite file, a PostgreSQL prefix, a Redis
namespace. A target is plain data, so it crosses a process boundary as a JSON argument."""

from __future__ import annotations

import json
import os
import uuid
from dataclasses import asdict, dataclass
from pathlib import Path

from sqlalchemy import text

from jobs import JobDriver

POSTGRES_URL = os.environ.get(
    "TEST_POSTGRES_URL", "postgresql+asyncpg://postgres@127.0.0.1:5432/test"
)
REDIS_URL = os.environ.get("TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
KINDS = ("sqlite", "postgres", "redis")


@dataclass(frozen=True)
class StoreTarget:
    kind: str
    url: str
    namespace: str

    @classmethod
    def fresh(cls, kind: str, tmp_path: Path) -> StoreTarget:
        namespace = f"p{uuid.uuid4().hex[:10]}_"
        if kind == "sqlite":
            return cls(kind, f"sqlite+aiosqlite:///{tmp_path / 'jobs.db'}", namespace)
        if kind == "postgres":
            return cls(kind, POSTGRES_URL, namespace)
        if kind == "redis":
            return cls(kind, REDIS_URL, namespace)
        raise ValueError(f"unknown store kind {kind!r}")

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> StoreTarget:
        return cls(**json.loads(text))


def build_driver(target: StoreTarget) -> JobDriver:
    """A driver on the target, using the store's own clock (no injected clock)."""
    if target.kind == "redis":
        from redis_jobs import RedisJobDriver

        return RedisJobDriver(url=target.url, namespace=target.namespace)
    from orm_sqlalchemy.store import SQLAlchemyJobStore

    return SQLAlchemyJobStore(target.url, table_prefix=target.namespace)


async def drop_target(target: StoreTarget) -> None:
    """Remove everything the target's store wrote (never anything else)."""
    if target.kind == "redis":
        from redis.asyncio import Redis

        from tests.integration.redis.harness import delete_namespace

        client = Redis.from_url(target.url)
        try:
            await delete_namespace(client, target.namespace)
        finally:
            await client.aclose()
    elif target.kind == "postgres":
        from orm_sqlalchemy.engine import create_engine

        engine = create_engine(target.url)
        try:
            async with engine.begin() as conn:
                await conn.execute(text(f'DROP TABLE IF EXISTS "{target.namespace}queue"'))
        finally:
            await engine.dispose()
