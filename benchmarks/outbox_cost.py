"""What an outbox entry costs the app's own transactions on PostgreSQL.

20 concurrent producers, each committing transactions in a loop for a fixed time: one row in
an orders table, plus (the outbox row) one outbox entry appended in the same transaction. No
relay runs, so the figure is the producers' alone: commits per second and the p99 commit time,
with and without the entry, in one sitting. The outbox may cost at most 25 % of the throughput
and 1.5x the p99 (issue 15): the entry is one more INSERT and nothing that serialises commits
(its NOTIFY goes after the commit, on the store's own connection).
"""

from __future__ import annotations

import asyncio
import statistics
import time
import uuid

from sqlalchemy import BigInteger, Column, MetaData, String, Table

from orm_sqlalchemy import SQLAlchemyOutboxStore, SQLAlchemyTransactionManager, create_engine
from orm_sqlalchemy.factory import drop_prefixed_tables

from .drivers import POSTGRES_URL

PRODUCERS = 20


async def producers(*, with_outbox: bool, seconds: float) -> tuple[float, float]:
    """(commits per second, p99 commit ms) of PRODUCERS producers over ``seconds``."""
    prefix = f"bench{uuid.uuid4().hex[:8]}_"
    engine = create_engine(POSTGRES_URL, pool_size=PRODUCERS, max_overflow=0)
    metadata = MetaData()
    orders = Table(
        f"{prefix}orders",
        metadata,
        Column("id", BigInteger, primary_key=True, autoincrement=True),
        Column("sku", String(40), nullable=False),
    )
    tm = SQLAlchemyTransactionManager(engine)
    outbox = SQLAlchemyOutboxStore(tm, table_prefix=prefix)
    timings: list[float] = []
    try:
        async with engine.begin() as conn:
            await conn.run_sync(metadata.create_all)
        await outbox.create_schema()
        deadline = time.perf_counter() + seconds

        async def producer() -> None:
            while time.perf_counter() < deadline:
                started = time.perf_counter()
                async with tm.transaction() as session:
                    await session.execute(orders.insert().values(sku="sku-1"))
                    if with_outbox:
                        await outbox.append("order.placed", {"sku": "sku-1"})
                timings.append(time.perf_counter() - started)

        began = time.perf_counter()
        await asyncio.gather(*(producer() for _ in range(PRODUCERS)))
        elapsed = time.perf_counter() - began
    finally:
        await outbox.close()
        async with engine.begin() as conn:
            await drop_prefixed_tables(conn, prefix)
        await engine.dispose()
    timings.sort()
    p99 = timings[min(len(timings) - 1, int(len(timings) * 0.99))] * 1000
    return len(timings) / elapsed, p99


async def outbox_cost(runs: int, seconds: float = 5.0) -> list[list[str]]:
    """Table rows: without and with the outbox entry, median [min-max] of ``runs`` each,
    alternating so both see the same machine; then the ratios of the medians."""
    results: dict[bool, tuple[list[float], list[float]]] = {False: ([], []), True: ([], [])}
    for _ in range(runs):
        for with_outbox in (False, True):
            rate, p99 = await producers(with_outbox=with_outbox, seconds=seconds)
            results[with_outbox][0].append(rate)
            results[with_outbox][1].append(p99)
    rows = []
    for with_outbox, label in ((False, "row alone"), (True, "row + outbox entry")):
        rates, p99s = results[with_outbox]
        rows.append([label, _fmt(rates, 0), _fmt(p99s, 1)])
    rate_ratio = statistics.median(results[True][0]) / statistics.median(results[False][0])
    p99_ratio = statistics.median(results[True][1]) / statistics.median(results[False][1])
    rows.append(["outbox / alone", f"{rate_ratio:.2f} (>= 0.75)", f"{p99_ratio:.2f}x (<= 1.5x)"])
    return rows


def _fmt(samples: list[float], digits: int) -> str:
    low, mid, high = min(samples), statistics.median(samples), max(samples)
    return f"{mid:,.{digits}f} [{low:,.{digits}f}-{high:,.{digits}f}]"
