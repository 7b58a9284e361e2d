"""Numbers that survive purges: per-minute outcome counters, counted by runners, kept by stores.

A runner counts each execution's outcome and runtime in memory (``OutcomeTally.add``: one dict
update, no I/O on the settle path) and hands the tally to the store every heartbeat interval and
when it closes (``flush``), through the SPI's ``OutcomeCounters.add_counts``: one batched write
per interval, whatever the throughput. A worker killed outright loses at most its last
interval's counts (the jobs themselves are not affected). Minutes are the worker's clock's.

Readers merge rows (``summarize``): totals per type and outcome, and runtime percentiles from the
buckets (``percentile``: the upper bound of the bucket holding it, so p95 "<= 250 ms").
``MemoryCounters`` is the reference store the in-process driver keeps.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from loguru import logger

from .clock import Clock
from .spi.driver import OutcomeCounters
from .spi.records import COUNTERS_KEEP_MS, DURATION_BOUNDS_MS, OutcomeCount

MINUTE_MS = 60_000
BUCKETS = len(DURATION_BOUNDS_MS) + 1
OUTCOME_OF = {"completed": "completed", "failed": "failed", "retry": "retried"}
"""An attempt's outcome (``execution.Outcome``) -> the counted one; others are not counted."""


class OutcomeTally:
    """What a runner counted since its last flush: (type, outcome) -> numbers.

    ``add`` is on every execution's path, so it is a dict update and nothing else (measured:
    reading a clock per job cost the in-process drain some 8 %; as it is, 2-4 %, and within
    the noise on SQLite); the minute is stamped when the tally is drained, every heartbeat
    interval: a count lands in the minute of its flush, at most one interval late."""

    __slots__ = ("_clock", "_rows")

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._rows: dict[tuple[str, str], list[float] | None] = {}

    def add(self, job_type: str, outcome: str, duration_ms: float) -> None:
        key = (job_type, outcome)
        row = self._rows.get(key, _MISSING)
        if row is _MISSING:
            row = self._rows[key] = [0.0] * (BUCKETS + 2) if outcome in OUTCOME_OF else None
        if row is None:  # an outcome that is not counted (cancelled, lease_lost ...)
            return
        row[0] += 1
        row[1] += duration_ms
        row[2 + bisect.bisect_left(DURATION_BOUNDS_MS, duration_ms)] += 1

    def drain(self) -> list[OutcomeCount]:
        rows, self._rows = self._rows, {}
        now = self._clock.now_ms()
        minute = now - now % MINUTE_MS
        return [
            OutcomeCount(
                minute_ms=minute,
                type=job_type,
                outcome=OUTCOME_OF[outcome],
                count=int(row[0]),
                duration_ms=round(row[1]),
                buckets=tuple(int(value) for value in row[2:]),
            )
            for (job_type, outcome), row in rows.items()
            if row is not None and row[0]
        ]

    def put_back(self, counts: Iterable[OutcomeCount]) -> None:
        """Counts a flush could not write, kept for the next one (stamped anew then)."""
        back = {counted: raw for raw, counted in OUTCOME_OF.items()}
        for count in counts:
            key = (count.type, back[count.outcome])
            row = self._rows.get(key) or [0.0] * (BUCKETS + 2)
            self._rows[key] = row
            row[0] += count.count
            row[1] += count.duration_ms
            for index, value in enumerate(count.buckets):
                row[2 + index] += value


_MISSING: list[float] = []


async def flush(tally: OutcomeTally, driver: object) -> None:
    """Hand the tally to the driver's counters (nothing when it keeps none); on a failure the
    counts are kept for the next flush and the error is raised."""
    if not isinstance(driver, OutcomeCounters):
        tally.drain()
        return
    counts = tally.drain()
    if not counts:
        return
    try:
        await driver.add_counts(counts)
    except BaseException:
        tally.put_back(counts)
        raise


def merge(rows: Iterable[OutcomeCount], key: str = "type") -> dict[tuple[str, str], OutcomeCount]:
    """Rows summed by (``key`` value, outcome); ``key`` is "type" or "minute_ms"."""
    merged: dict[tuple[str, str], list[int]] = {}
    for row in rows:
        group = (str(getattr(row, key)), row.outcome)
        into = merged.setdefault(group, [0] * (BUCKETS + 2))
        into[0] += row.count
        into[1] += row.duration_ms
        for index, value in enumerate(row.buckets[:BUCKETS]):
            into[2 + index] += value
    return {
        group: OutcomeCount(
            minute_ms=0,
            type=group[0],
            outcome=group[1],
            count=numbers[0],
            duration_ms=numbers[1],
            buckets=tuple(numbers[2:]),
        )
        for group, numbers in merged.items()
    }


def percentile(buckets: Sequence[int], fraction: float) -> int | None:
    """The upper bound (ms) of the bucket holding the ``fraction`` quantile; None without runs;
    past the last bound: the last bound (the runtime is "longer than" it)."""
    total = sum(buckets)
    if total == 0:
        return None
    wanted = fraction * total
    seen = 0
    for index, value in enumerate(buckets):
        seen += value
        if seen >= wanted and value:
            return DURATION_BOUNDS_MS[min(index, len(DURATION_BOUNDS_MS) - 1)]
    return DURATION_BOUNDS_MS[-1]


@dataclass(frozen=True, slots=True)
class TypeHistory:
    """One job type over a window: executions by outcome and runtime percentiles."""

    type: str
    completed: int = 0
    failed: int = 0
    retried: int = 0
    p50_ms: int | None = None
    p95_ms: int | None = None
    mean_ms: float | None = None
    buckets: tuple[int, ...] = field(default=())


def summarize(rows: Iterable[OutcomeCount]) -> list[TypeHistory]:
    """Per type: counts by outcome; percentiles over every counted run (any outcome)."""
    merged = merge(rows)
    types = sorted({job_type for job_type, _ in merged})
    result = []
    for job_type in types:
        counts = {outcome: merged.get((job_type, outcome)) for outcome in OUTCOME_OF.values()}
        buckets = [0] * BUCKETS
        runs = runtime = 0
        for row in counts.values():
            if row is None:
                continue
            runs += row.count
            runtime += row.duration_ms
            for index, value in enumerate(row.buckets):
                buckets[index] += value
        result.append(
            TypeHistory(
                type=job_type,
                completed=counts["completed"].count if counts["completed"] else 0,
                failed=counts["failed"].count if counts["failed"] else 0,
                retried=counts["retried"].count if counts["retried"] else 0,
                p50_ms=percentile(buckets, 0.50),
                p95_ms=percentile(buckets, 0.95),
                mean_ms=round(runtime / runs, 1) if runs else None,
                buckets=tuple(buckets),
            )
        )
    return result


class MemoryCounters:
    """The reference ``OutcomeCounters``: rows in a dict, pruned past ``COUNTERS_KEEP_MS``."""

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._rows: dict[tuple[int, str, str], OutcomeCount] = {}

    async def add_counts(self, counts: Sequence[OutcomeCount]) -> None:
        for key, row in merge_exact([*self._rows.values(), *counts]).items():
            self._rows[key] = row
        oldest = self._clock.now_ms() - COUNTERS_KEEP_MS
        for key in [key for key in self._rows if key[0] < oldest]:
            del self._rows[key]

    async def read_counts(self, since_ms: int, job_type: str | None = None) -> list[OutcomeCount]:
        return [
            self._rows[key]
            for key in sorted(self._rows)
            if key[0] >= since_ms and (job_type is None or key[1] == job_type)
        ]


def merge_exact(rows: Iterable[OutcomeCount]) -> dict[tuple[int, str, str], OutcomeCount]:
    """Rows summed by (minute, type, outcome): how a store adds a batch to what it holds."""
    summed: dict[tuple[int, str, str], list[int]] = {}
    for row in rows:
        into = summed.setdefault((row.minute_ms, row.type, row.outcome), [0] * (BUCKETS + 2))
        into[0] += row.count
        into[1] += row.duration_ms
        for index, value in enumerate(row.buckets[:BUCKETS]):
            into[2 + index] += value
    return {
        key: OutcomeCount(
            minute_ms=key[0],
            type=key[1],
            outcome=key[2],
            count=numbers[0],
            duration_ms=numbers[1],
            buckets=tuple(numbers[2:]),
        )
        for key, numbers in summed.items()
    }


def log_flush_failure(exc: BaseException, failing: bool) -> None:
    if not failing:
        logger.warning(
            "writing the outcome counters failed ({}: {}); kept for the next interval",
            type(exc).__name__,
            exc,
        )
