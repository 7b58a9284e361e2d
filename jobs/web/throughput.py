"""Completions and failures per minute over the last hour, and the chart's geometry.

The counts come from the store's per-minute outcome counters (``jobs.counters``), which a purge
or retention does not erase. A store without counters, or with none yet for the hour (runners
write theirs every heartbeat interval), is read the old way, from ``JobInfo.finished_at`` on the
newest pages of completed and failed jobs: at most ``MAX_SCANNED`` jobs per state, stopping at
the first page with nothing finished inside the hour. When the cap cuts the reading short, the
chart says it is partial rather than pretending the hour was quiet.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING

from ..clock import to_epoch_ms

if TYPE_CHECKING:
    from ..queue import JobQueue

MINUTE_MS = 60_000
WINDOW_MINUTES = 60
PAGE_SIZE = 200
MAX_SCANNED = 2_000


@dataclass(frozen=True, slots=True)
class Bar:
    """One minute of the chart: counts and the rectangles that draw them (SVG units)."""

    start_ms: int
    completed: int
    failed: int
    x: float
    width: float
    completed_y: float
    completed_height: float
    failed_y: float
    failed_height: float


@dataclass(slots=True)
class Throughput:
    """Per-minute counts, oldest minute first; ``partial`` when the reading was capped."""

    window_start_ms: int
    completed: list[int] = field(default_factory=lambda: [0] * WINDOW_MINUTES)
    failed: list[int] = field(default_factory=lambda: [0] * WINDOW_MINUTES)
    partial: bool = False

    @property
    def total_completed(self) -> int:
        return sum(self.completed)

    @property
    def total_failed(self) -> int:
        return sum(self.failed)

    @property
    def peak(self) -> int:
        return max(c + f for c, f in zip(self.completed, self.failed, strict=True))

    def add(self, finished_ms: int, *, failed: bool) -> bool:
        """Count one job finished at ``finished_ms``; False if that is outside the window."""
        minute = (finished_ms - self.window_start_ms) // MINUTE_MS
        if not 0 <= minute < WINDOW_MINUTES:
            return False
        (self.failed if failed else self.completed)[minute] += 1
        return True

    def bars(self, width: float, height: float) -> list[Bar]:
        """Stacked bars (completed below, failed on top) scaled so the peak fills ``height``."""
        scale = height / max(self.peak, 1)
        slot = width / WINDOW_MINUTES
        bars = []
        for minute, (done, failed) in enumerate(zip(self.completed, self.failed, strict=True)):
            done_height = done * scale
            failed_height = failed * scale
            bars.append(
                Bar(
                    start_ms=self.window_start_ms + minute * MINUTE_MS,
                    completed=done,
                    failed=failed,
                    x=minute * slot + 1,
                    width=max(slot - 2, 1),
                    completed_y=height - done_height,
                    completed_height=done_height,
                    failed_y=height - done_height - failed_height,
                    failed_height=failed_height,
                )
            )
        return bars


async def count_throughput(queue: JobQueue, *, now_ms: int | None = None) -> Throughput:
    """Completions and failures per minute of the last hour: from the counters if the store
    has any for the hour, else by reading the newest finished jobs page by page."""
    now = now_ms if now_ms is not None else int(time.time() * 1000)
    current_minute = now - now % MINUTE_MS
    result = Throughput(window_start_ms=current_minute - (WINDOW_MINUTES - 1) * MINUTE_MS)
    try:
        counted = await queue.outcome_counts(since_ms=result.window_start_ms)
    except NotImplementedError:
        counted = []
    if counted:
        for row in counted:
            minute = (row.minute_ms - result.window_start_ms) // MINUTE_MS
            if row.outcome in ("completed", "failed") and 0 <= minute < WINDOW_MINUTES:
                counts = result.failed if row.outcome == "failed" else result.completed
                counts[minute] += row.count
        return result
    for state in ("completed", "failed"):
        cursor: str | None = None
        scanned = 0
        while True:
            page = await queue.list_jobs(state=state, limit=PAGE_SIZE, cursor=cursor)
            inside = 0
            for job in page.jobs:
                finished = _epoch_ms(job.finished_at)
                if finished is not None and result.add(finished, failed=state == "failed"):
                    inside += 1
            scanned += len(page.jobs)
            cursor = page.next_cursor
            if cursor is None or inside == 0:
                break
            if scanned >= MAX_SCANNED:
                result.partial = True
                break
    return result


def _epoch_ms(when: datetime | None) -> int | None:
    return to_epoch_ms(when) if when is not None else None
