"""A worker process for the SQLite concurrency test: enqueue, then drain, on a shared file.

``python -m tests.integration.sql_store.sqlite_writer URL PREFIX COUNT`` enqueues COUNT jobs,
then claims and completes jobs until none is left, and prints how many it completed. Any
error (such as "database is locked") makes it exit non-zero.
"""

from __future__ import annotations

import asyncio
import sys

from jobs.testing import new_request
from orm_sqlalchemy.store import SQLAlchemyJobStore


async def main(url: str, prefix: str, count: int) -> None:
    async with SQLAlchemyJobStore(url, table_prefix=prefix) as store:
        await asyncio.gather(*(store.enqueue(new_request()) for _ in range(count)))
        completed = 0

        async def worker() -> None:
            nonlocal completed
            while batch := await store.claim(5, 30_000, ["t"]):
                for job in batch:
                    assert await store.complete(job.id, job.lease_token)
                    completed += 1

        await asyncio.gather(*(worker() for _ in range(4)))
        sys.stdout.write(f"{completed}\n")


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3])))
