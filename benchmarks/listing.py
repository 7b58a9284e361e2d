"""List-page cost: page 1 and page 100 of failed jobs among many jobs (issue 10).

A store of ``total`` jobs, one in ``failed_every`` of them failed, the rest pending; then the
time of ``list_jobs(state="failed", limit=50)`` for the first page and for page 100 (reached by
following cursors, then timed on its own after as many untimed fetches, which prepare the
statement on each pooled connection). With cursor pagination over an index both cost about the
same, whatever ``total``.
"""

from __future__ import annotations

import time
import uuid

from jobs import JobDriver
from jobs.spi import JobRequest

PAGE = 50
BATCH = 1_000


async def fill(driver: JobDriver, total: int, failed_every: int) -> None:
    for start in range(0, total, BATCH):
        batch = [
            JobRequest(
                id=uuid.uuid4().hex,
                type="fail.me" if (start + i) % failed_every == 0 else "wait",
                payload="null",
                max_attempts=1,
            )
            for i in range(min(BATCH, total - start))
        ]
        await driver.enqueue_many(batch)
    while claimed := await driver.claim(BATCH, 60_000, ["fail.me"]):
        for job in claimed:
            await driver.fail(job.id, job.lease_token, error="RuntimeError: benchmark")


async def page_times(driver: JobDriver, page: int, repeats: int) -> list[float]:
    """Milliseconds of ``repeats`` fetches of page ``page`` (1-based) of failed jobs."""
    cursor = None
    for _ in range(page - 1):
        cursor = (await driver.list_jobs(state="failed", limit=PAGE, cursor=cursor)).next_cursor
        assert cursor is not None, f"fewer than {page} pages of failed jobs"
    for _ in range(repeats):  # untimed: the first fetches prepare the statement on each
        await driver.list_jobs(state="failed", limit=PAGE, cursor=cursor)  # pooled connection
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        result = await driver.list_jobs(state="failed", limit=PAGE, cursor=cursor)
        times.append((time.perf_counter() - started) * 1000)
        assert len(result.jobs) == PAGE
    return times


async def listing_row(
    driver: JobDriver, total: int = 200_000, failed_every: int = 10, repeats: int = 20
) -> tuple[list[float], list[float]]:
    """Milliseconds of ``repeats`` fetches of page 1 and of page 100 on a freshly filled store."""
    await fill(driver, total, failed_every)
    return await page_times(driver, 1, repeats), await page_times(driver, 100, repeats)
