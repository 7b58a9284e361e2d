"""What a soak or a start/stop test watches: the process's memory, descriptors, sockets, tasks,
and how much the store holds."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path

import psutil
from sqlalchemy import text

from tests.stores import POSTGRES_URL, REDIS_URL

KINDS = ("sqlite", "postgres", "redis")


@dataclass(frozen=True)
class Sample:
    seconds: float
    rss_mb: float
    fds: int
    sockets: int
    tasks: int


def sample(seconds: float) -> Sample:
    process = psutil.Process()
    return Sample(
        seconds=seconds,
        rss_mb=process.memory_info().rss / 2**20,
        fds=process.num_fds(),
        sockets=len(process.net_connections(kind="inet")),
        tasks=len(asyncio.all_tasks()),
    )


def slope_mb_per_min(samples: list[Sample]) -> float:
    """Least-squares slope of RSS over time, in MB per minute."""
    n = len(samples)
    mean_t = sum(s.seconds for s in samples) / n
    mean_m = sum(s.rss_mb for s in samples) / n
    num = sum((s.seconds - mean_t) * (s.rss_mb - mean_m) for s in samples)
    den = sum((s.seconds - mean_t) ** 2 for s in samples)
    return 60 * num / den if den else 0.0


def url_of(kind: str, tmp_path: Path) -> str:
    return {
        "sqlite": f"sqlite+aiosqlite:///{tmp_path / 'soak.db'}",
        "postgres": POSTGRES_URL,
        "redis": REDIS_URL,
    }[kind]


async def stored_records(kind: str, url: str, namespace: str) -> int:
    """Keys of the Redis namespace, or rows of the job table."""
    if kind == "redis":
        from redis.asyncio import Redis

        from redis_jobs.keys import Keys

        client = Redis.from_url(url)
        try:
            pattern = Keys(namespace).pattern
            return sum([1 async for _ in client.scan_iter(match=pattern, count=1000)])
        finally:
            await client.aclose()
    from orm_sqlalchemy import create_engine

    engine = create_engine(url)
    try:
        async with engine.connect() as conn:
            table = f'"{namespace}queue"'
            return int((await conn.execute(text(f"SELECT count(*) FROM {table}"))).scalar_one())
    finally:
        await engine.dispose()
