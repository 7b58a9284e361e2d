"""The rows of ``make bench`` measured under load, each printed beside its reference and target.

Every figure is the median of ``runs`` runs; a ratio is ours over the reference of the same
run (median of the per-run ratios). The issue's targets (issue 17) are printed beside them.
"""

from __future__ import annotations

import asyncio
import statistics
from collections.abc import Awaitable, Callable

from jobs import JobQueue

from .drivers import FACTORIES, POSTGRES_URL, REDIS_URL
from .load import (
    asyncpg_insert_loop_rate,
    bare_semaphore_rate,
    bulk_enqueue_rate,
    io_drain_rate,
    redis_script_loop_rate,
)
from .outbox_load import (
    PRODUCERS,
    WARMUP_S,
    LoadResult,
    Rate,
    outbox_under_load,
    raw_asyncpg_rate,
    raw_sqlite3_rate,
    sqlalchemy_rate,
)
from .scenarios import JOB_TYPE, PAYLOAD, enqueue_rate

DURABLE = ("sqlite", "postgres", "redis")
BULK_TARGET = {"redis": 50_000, "postgres": 20_000, "sqlite": 20_000}


def _median(values: list[float]) -> float:
    return statistics.median(values)


def _row(*cells: object) -> None:
    print("| " + " | ".join(str(cell) for cell in cells) + " |", flush=True)


async def _guarded(name: str, width: int, work: Callable[[], Awaitable[None]]) -> None:
    try:
        await work()
    except Exception as exc:  # a missing server must not hide the other rows
        _row(name, f"unavailable: {type(exc).__name__}: {exc}", *([""] * (width - 2)))


async def io_drain_rows(runs: int, n: int = 10_000) -> None:
    print(f"\nI/O-bound drain: {n:,} jobs awaiting 10 ms, concurrency 50, vs a bare asyncio "
          "semaphore loop in the same run (target: ratio >= 0.85)\n")
    _row("driver", "ours jobs/s", "bare loop jobs/s", "ratio")
    print("|---|---|---|---|")
    for name in DURABLE:
        async def measure(name: str = name) -> None:
            ours, refs, ratios = [], [], []
            for _ in range(runs):
                reference = await bare_semaphore_rate(n, 50, 10)
                async with FACTORIES[name]() as driver:
                    rate = await io_drain_rate(driver, n, 50, 10)
                ours.append(rate)
                refs.append(reference)
                ratios.append(rate / reference)
            _row(name, f"{_median(ours):,.0f}", f"{_median(refs):,.0f}", f"{_median(ratios):.2f}")

        await _guarded(name, 4, measure)


async def bulk_rows(runs: int, n: int = 10_000) -> None:
    print(f"\nBulk enqueue: {n:,} jobs in batches of 1,000 (queue.enqueue_many)\n")
    _row("driver", "jobs/s", "target jobs/s")
    print("|---|---|---|")
    for name in DURABLE:
        async def measure(name: str = name) -> None:
            rates = []
            for _ in range(runs):
                async with FACTORIES[name]() as driver:
                    rates.append(await bulk_enqueue_rate(driver, n, 1_000))
            _row(name, f"{_median(rates):,.0f}", f">= {BULK_TARGET[name]:,}")

        await _guarded(name, 3, measure)


async def single_enqueue_rows(runs: int, n: int = 2_000) -> None:
    print(f"\nSingle enqueue, {n:,} one by one, vs the bare client loop in the same run "
          "(target: ratio >= 0.90)\n")
    _row("driver", "ours jobs/s", "reference", "reference calls/s", "ratio")
    print("|---|---|---|---|---|")
    references: dict[str, tuple[str, Callable[[], Awaitable[float]]]] = {
        "redis": ("redis-py EVALSHA loop", lambda: redis_script_loop_rate(REDIS_URL, n)),
        "postgres": ("asyncpg INSERT loop", lambda: asyncpg_insert_loop_rate(POSTGRES_URL, n)),
    }
    for name, (label, reference) in references.items():
        async def measure(
            name: str = name,
            label: str = label,
            reference: Callable[[], Awaitable[float]] = reference,
        ) -> None:
            ours, refs, ratios = [], [], []
            for _ in range(runs):
                ref = await reference()
                async with FACTORIES[name]() as driver:
                    if name == "postgres":  # set up untimed, as the reference's table is
                        await JobQueue(driver).enqueue(JOB_TYPE, PAYLOAD)
                    rate = await enqueue_rate(driver, n)
                ours.append(rate)
                refs.append(ref)
                ratios.append(rate / ref)
            _row(name, f"{_median(ours):,.0f}", label, f"{_median(refs):,.0f}",
                 f"{_median(ratios):.2f}")

        await _guarded(name, 5, measure)


async def outbox_load_rows(runs: int, duration_s: float, kinds: list[str]) -> None:
    print(f"\nOutbox under load: {PRODUCERS} producers for {duration_s:g} s after a {WARMUP_S:g} s "
          "warm-up (order row + entry per "
          "transaction), relay batch 100, runner concurrency 10; raw = the same transaction "
          "with the bare client in the same run. Targets: commit/raw >= 0.60 (PostgreSQL), "
          ">= 0.30 (SQLite); e2e/commit >= 0.95; p99 <= 50 ms (PostgreSQL), <= 100 ms (SQLite). "
          "The worker-process rows run the relay and runner as `neverlost worker` would, in a "
          "process of their own (default poll interval: on SQLite a commit in another process "
          "is found by polling)\n")
    _row("outbox", "jobs on", "commit tx/s", "raw tx/s", "commit/raw", "e2e jobs/s", "e2e/commit",
         "p50 ms", "p99 ms")
    print("|---|---|---|---|---|---|---|---|---|")
    costs: dict[str, tuple[list[Rate], list[Rate], list[LoadResult]]] = {}
    for kind in kinds:
        for jobs_on in ("same", "redis"):
            async def measure(kind: str = kind, jobs_on: str = jobs_on) -> None:
                results: list[LoadResult] = []
                apart: list[LoadResult] = []
                raws: list[Rate] = []
                alone: list[Rate] = []
                for _ in range(runs):
                    if kind == "postgres":
                        raws.append(await raw_asyncpg_rate(duration_s))
                    else:
                        raws.append(await asyncio.to_thread(raw_sqlite3_rate, duration_s))
                    if jobs_on == "same":
                        alone.append(await sqlalchemy_rate(kind, duration_s))
                    results.append(await outbox_under_load(kind, jobs_on, duration_s))
                    if jobs_on == "same":
                        apart.append(
                            await outbox_under_load(kind, jobs_on, duration_s, worker_process=True)
                        )
                if jobs_on == "same":
                    costs[kind] = (raws, alone, results)
                label = "same database" if jobs_on == "same" else "redis"
                _load_row(kind, label, results, raws)
                if apart:
                    _load_row(kind, f"{label}, relay + runner in a worker process", apart, raws)

            await _guarded(kind, 9, measure)
    _outbox_cost_rows(costs)


def _load_row(kind: str, label: str, results: list[LoadResult], raws: list[Rate]) -> None:
    pairs = zip(results, raws, strict=True)
    _row(
        kind,
        label,
        f"{_median([r.commits_per_s for r in results]):,.0f}",
        f"{_median([raw.per_s for raw in raws]):,.0f}",
        f"{_median([r.commits_per_s / raw.per_s for r, raw in pairs]):.2f}",
        f"{_median([r.delivered_per_s for r in results]):,.0f}",
        f"{_median([r.delivered_per_s / r.commits_per_s for r in results]):.2f}",
        f"{_median([r.p50_ms for r in results]):,.1f}",
        f"{_median([r.p99_ms for r in results]):,.1f}",
    )


def _outbox_cost_rows(costs: dict[str, tuple[list[Rate], list[Rate], list[LoadResult]]]) -> None:
    """SQLAlchemy's share beside ours: the same runs as the "same database" rows above."""
    print("\nThe same transaction three ways, in the runs of the \"same database\" rows: raw "
          "client; a plain SQLAlchemy session with the two INSERTs (no outbox, relay or runner: "
          "SQLAlchemy's own cost); ours (tm.transaction + outbox.append, relay and runner in the "
          "same process). CPU = process CPU per transaction\n")
    _row("outbox", "raw tx/s", "raw CPU us", "SQLAlchemy tx/s", "SQLAlchemy/raw",
         "SQLAlchemy CPU us", "ours tx/s", "ours/SQLAlchemy", "ours CPU us")
    print("|---|---|---|---|---|---|---|---|---|")
    for kind, (raws, alone, results) in costs.items():
        ours_alone = list(zip(results, alone, strict=True))
        _row(
            kind,
            f"{_median([r.per_s for r in raws]):,.0f}",
            f"{_median([r.cpu_us for r in raws]):,.0f}",
            f"{_median([a.per_s for a in alone]):,.0f}",
            f"{_median([a.per_s / r.per_s for a, r in zip(alone, raws, strict=True)]):.2f}",
            f"{_median([a.cpu_us for a in alone]):,.0f}",
            f"{_median([o.commits_per_s for o in results]):,.0f}",
            f"{_median([o.commits_per_s / a.per_s for o, a in ours_alone]):.2f}",
            f"{_median([o.cpu_us_per_commit for o in results]):,.0f}",
        )
