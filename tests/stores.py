"""Durable stores shared by the multi-process tests: a SQLite file, a PostgreSQL table prefix,
a Redis namespace. A target is plain data, so it crosses a process boundary as JSON.

PostgreSQL and Redis must be running (TEST_POSTGRES_URL / TEST_REDIS_URL, by default on
127.0.0.1); tests fail, not skip, without them. Each target is fresh and removed afterwards.
"""

from __future__ import annotations

import json
import os
import uuid
from dataclasses import asdict, dataclass
from pathlib import Path

import pytest

from jobs import Clock, JobDriver
from jobs.testing.chaos import drop_store

POSTGRES_URL = os.environ.get(
    "TEST_POSTGRES_URL", "postgresql+asyncpg://postgres@127.0.0.1:5432/test"
)
REDIS_URL = os.environ.get("TEST_REDIS_URL", "redis://127.0.0.1:6379/0")

STORE_KINDS = [
    pytest.param("sqlite", id="sqlite"),
    pytest.param("postgres", id="postgres", marks=pytest.mark.postgres),
    pytest.param(
        "pgbouncer", id="pgbouncer", marks=[pytest.mark.postgres, pytest.mark.pgbouncer]
    ),
    pytest.param("redis", id="redis", marks=pytest.mark.redis),
]


@dataclass(frozen=True)
class StoreTarget:
    kind: str  # "sqlite" | "postgres" | "pgbouncer" (PostgreSQL through it) | "redis"
    url: str
    namespace: str  # the table prefix, or the Redis namespace

    @classmethod
    def fresh(cls, kind: str, tmp_path: Path, *, url: str | None = None) -> StoreTarget:
        """A fresh target of ``kind``; a "pgbouncer" one needs the ``url`` of the PgBouncer."""
        namespace = f"p{uuid.uuid4().hex[:10]}_"
        urls = {
            "sqlite": f"sqlite+aiosqlite:///{tmp_path / 'jobs.db'}",
            "postgres": POSTGRES_URL,
            "pgbouncer": url,
            "redis": REDIS_URL,
        }
        chosen = urls.get(kind)
        if chosen is None:
            raise ValueError(f"unknown store kind {kind!r} (or a pgbouncer one without url)")
        return cls(kind, chosen, namespace)

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> StoreTarget:
        return cls(**json.loads(text))

    def open(self, clock: Clock | None = None) -> JobDriver:
        """A driver on the target (the store's own clock unless ``clock`` is given)."""
        if self.kind == "redis":
            from redis_jobs import RedisJobDriver

            return RedisJobDriver(url=self.url, namespace=self.namespace, clock=clock)
        from orm_sqlalchemy import SQLAlchemyJobStore

        return SQLAlchemyJobStore(self.url, table_prefix=self.namespace, clock=clock)

    async def drop(self) -> None:
        """Remove everything the target's store wrote (never anything else)."""
        await drop_store(self.url, self.namespace)
