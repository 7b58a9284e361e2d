"""``make bench``: enqueue and drain throughput and wake-up latency for each driver.

Each figure is the median of ``--runs`` runs (min-max in brackets); the machines are shared and
noisy, so compare ratios in one sitting rather than absolute numbers across days.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys

from loguru import logger

from jobs.logs import enable_logging

from .claim_cost import PRIORITIES, SMALL, claim_row
from .drivers import FACTORIES, DriverFactory
from .inbox_cost import inbox_cost_rows
from .listing import listing_row
from .load_report import bulk_rows, io_drain_rows, outbox_load_rows, single_enqueue_rows
from .outbox import commit_to_handler
from .outbox_cost import PRODUCERS, outbox_cost
from .redis_cpu import redis_cpu_rows
from .scenarios import drain_rate, enqueue_rate, start_latency
from .sync_enqueue import sync_enqueue_rows
from .workflows import chain_latency, enqueue_costs


def _fmt(samples: list[float], digits: int) -> str:
    low, mid, high = min(samples), statistics.median(samples), max(samples)
    return f"{mid:,.{digits}f} [{low:,.{digits}f}-{high:,.{digits}f}]"


async def measure(factory: DriverFactory, n: int, runs: int, samples: int) -> list[str]:
    enqueue: list[float] = []
    drain: list[float] = []
    p50: list[float] = []
    p99: list[float] = []
    for _ in range(runs):
        async with factory() as driver:
            enqueue.append(await enqueue_rate(driver, n))
        async with factory() as driver:
            drain.append(await drain_rate(driver, n))
        async with factory() as driver:
            low, high = await start_latency(driver, samples)
            p50.append(low)
            p99.append(high)
    return [_fmt(enqueue, 0), _fmt(drain, 0), _fmt(p50, 3), _fmt(p99, 3)]


async def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__)
    parser.add_argument("--drivers", default=",".join(FACTORIES), help="comma-separated")
    parser.add_argument("-n", type=int, default=20_000, help="jobs per throughput run")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--samples", type=int, default=500, help="latency samples per run")
    parser.add_argument("--outbox", default="sqlite,postgres", help="databases for the outbox row")
    parser.add_argument(
        "--listing",
        default="inprocess,sqlite,postgres,redis",
        help="drivers for the list-page rows (comma-separated)",
    )
    parser.add_argument("--listing-jobs", type=int, default=200_000)
    parser.add_argument(
        "--claim",
        default="inprocess,sqlite,postgres,redis",
        help="drivers for the claim-cost rows with priorities (comma-separated)",
    )
    parser.add_argument("--claim-jobs", type=int, default=100_000)
    parser.add_argument(
        "--workflows",
        default="inprocess,sqlite,postgres,redis",
        help="drivers for the workflow rows (comma-separated)",
    )
    parser.add_argument(
        "--load",
        default="drain,bulk,single,sync,outbox,redis-cpu",
        help="rows under load (comma-separated)",
    )
    parser.add_argument("--load-seconds", type=float, default=4.0, help="outbox load duration")
    parser.add_argument("--inbox-jobs", type=int, default=2_000, help="jobs per inbox run")
    args = parser.parse_args(argv)
    logger.remove()
    logger.add(sys.stderr, level="WARNING")
    enable_logging()  # the library's lines are off until an app enables them
    header = ["driver", "enqueue jobs/s (1-by-1)", "drain jobs/s (c=10)", "start p50 ms", "p99 ms"]
    print(f"N={args.n} no-op jobs, median [min-max] of {args.runs} runs\n")
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for name in args.drivers.split(","):
        factory = FACTORIES.get(name)
        if factory is None:
            print(f"| {name} | unknown driver; known: {', '.join(FACTORIES)} |")
            continue
        try:
            cells = await measure(factory, args.n, args.runs, args.samples)
        except Exception as exc:  # a missing server must not hide the other rows
            print(f"| {name} | unavailable: {type(exc).__name__}: {exc} |")
            continue
        print("| " + " | ".join([name, *cells]) + " |", flush=True)
    print("\nOutbox: commit -> relay -> queue -> runner -> handler start, one order at a time\n")
    print("| database | commit-to-handler p50 ms | p99 ms |")
    print("|---|---|---|")
    for kind in args.outbox.split(","):
        if not kind:
            continue
        try:
            p50, p99 = [], []
            for _ in range(args.runs):
                low, high = await commit_to_handler(kind, args.samples)
                p50.append(low)
                p99.append(high)
        except Exception as exc:
            print(f"| {kind} | unavailable: {type(exc).__name__}: {exc} |")
            continue
        print(f"| {kind} | {_fmt(p50, 2)} | {_fmt(p99, 2)} |", flush=True)
    await _outbox_cost(args.runs)
    await _inbox_cost(args.runs, args.inbox_jobs)
    await _listing(args.listing, args.listing_jobs)
    await _claim_cost(args.claim, args.claim_jobs, args.runs)
    await _workflows(args.workflows, args.runs)
    await _under_load(args)
    return 0


async def _under_load(args: argparse.Namespace) -> None:
    rows = set(filter(None, args.load.split(",")))
    if "drain" in rows:
        await io_drain_rows(args.runs)
    if "bulk" in rows:
        await bulk_rows(args.runs)
    if "single" in rows:
        await single_enqueue_rows(args.runs)
    if "sync" in rows:
        await sync_enqueue_rows(args.runs)
    if "outbox" in rows:
        kinds = [kind for kind in args.outbox.split(",") if kind]
        await outbox_load_rows(args.runs, args.load_seconds, kinds)
    if "redis-cpu" in rows:
        await redis_cpu_rows(args.runs)


async def _outbox_cost(runs: int) -> None:
    print(
        f"\nOutbox cost: {PRODUCERS} concurrent producers committing a row, with and without "
        "an outbox entry in the same transaction (PostgreSQL, 5 s each)\n"
    )
    print("| transaction | commits/s | p99 commit ms |")
    print("|---|---|---|")
    try:
        rows = await outbox_cost(runs)
    except Exception as exc:
        print(f"| postgres | unavailable: {type(exc).__name__}: {exc} |")
        return
    for row in rows:
        print("| " + " | ".join(row) + " |", flush=True)


async def _inbox_cost(runs: int, n: int) -> None:
    print(
        f"\nInbox cost: {n} jobs drained (concurrency 10), each handler committing one effect "
        "row, plain or through @job_handler(inbox=...); microseconds per job\n"
    )
    print("| effects (jobs) | plain us/job | inbox us/job | inbox cost us/job |")
    print("|---|---|---|---|")
    try:
        rows = await inbox_cost_rows(runs, n)
    except Exception as exc:
        print(f"| inbox | unavailable: {type(exc).__name__}: {exc} |")
        return
    for row in rows:
        print("| " + " | ".join(row) + " |", flush=True)


async def _listing(drivers: str, total: int) -> None:
    print(
        f"\nList pages: failed jobs, 50 a page, among {total:,} jobs (1 in 10 failed); "
        "median [min-max] of 20 fetches\n"
    )
    print("| driver | page 1 ms | page 100 ms |")
    print("|---|---|---|")
    for name in filter(None, drivers.split(",")):
        factory = FACTORIES.get(name)
        if factory is None:
            print(f"| {name} | unknown driver; known: {', '.join(FACTORIES)} |")
            continue
        try:
            async with factory() as driver:
                first, hundredth = await listing_row(driver, total)
        except Exception as exc:
            print(f"| {name} | unavailable: {type(exc).__name__}: {exc} |")
            continue
        print(f"| {name} | {_fmt(first, 3)} | {_fmt(hundredth, 3)} |", flush=True)


async def _claim_cost(drivers: str, total: int, runs: int) -> None:
    print(
        f"\nClaim cost: claim(10) among {total:,} due pending jobs, all priority 0 (plain) or "
        f"spread over priorities {PRIORITIES}, or plain under a global concurrency and a rate "
        "limit that hold nothing back (counted, chosen and recorded in the claim); median of "
        "300 claims, median [min-max] of runs\n"
    )
    print(
        f"| driver | plain claim ms | 5 priorities claim ms | ratio | "
        f"5 priorities among {SMALL:,} ms | with limits ms | ratio |"
    )
    print("|---|---|---|---|---|---|---|")
    for name in filter(None, drivers.split(",")):
        factory = FACTORIES.get(name)
        if factory is None:
            print(f"| {name} | unknown driver; known: {', '.join(FACTORIES)} |")
            continue
        columns: list[list[float]] = [[], [], [], []]
        try:
            for _ in range(runs):
                async with (
                    factory() as one,
                    factory() as other,
                    factory() as few,
                    factory() as limited,
                ):
                    cells = await claim_row(one, other, few, limited, total)
                for column, value in zip(columns, cells, strict=True):
                    column.append(value)
        except Exception as exc:
            print(f"| {name} | unavailable: {type(exc).__name__}: {exc} |")
            continue
        plain, prioritized, small, limited_ms = columns
        ratio = statistics.median(prioritized) / statistics.median(plain)
        limited_ratio = statistics.median(limited_ms) / statistics.median(plain)
        print(
            f"| {name} | {_fmt(plain, 3)} | {_fmt(prioritized, 3)} | {ratio:.2f} | "
            f"{_fmt(small, 3)} | {_fmt(limited_ms, 3)} | {limited_ratio:.2f} |",
            flush=True,
        )


async def _workflows(drivers: str, runs: int) -> None:
    print(
        "\nWorkflows: enqueue of a group of 100 with its callback and of a 10-step chain (one "
        "enqueue_workflow, median of 20) beside enqueue_many of as many plain jobs; a 3-step "
        "chain from enqueue to its last step's start beside the steps chained by hand (each "
        "handler enqueues the next; median of 50); median [min-max] of runs\n"
    )
    print(
        "| driver | group+callback ms | 101 plain ms | ratio | 10-chain ms | 10 plain ms | ratio "
        "| 3-chain start ms | by hand ms | ratio |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for name in filter(None, drivers.split(",")):
        factory = FACTORIES.get(name)
        if factory is None:
            print(f"| {name} | unknown driver; known: {', '.join(FACTORIES)} |")
            continue
        columns: list[list[float]] = [[] for _ in range(6)]
        try:
            for _ in range(runs):
                async with factory() as driver:
                    costs = await enqueue_costs(driver)
                async with factory() as driver:
                    latencies = await chain_latency(driver, 50)
                for column, value in zip(columns, (*costs, *latencies), strict=True):
                    column.append(value)
        except Exception as exc:
            print(f"| {name} | unavailable: {type(exc).__name__}: {exc} |")
            continue
        cells = [name]
        for first, second in zip(columns[::2], columns[1::2], strict=True):
            ratio = statistics.median(first) / statistics.median(second)
            cells += [_fmt(first, 2), _fmt(second, 2), f"{ratio:.2f}"]
        print("| " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    sys.exit(asyncio.run(main(sys.argv[1:])))
