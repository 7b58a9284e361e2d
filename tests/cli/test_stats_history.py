"""``neverlost stats --history``: executions per type from the store's counters, after the jobs
themselves were purged; runtimes as p50/p95 bucket bounds."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from jobs import JobHandlerRegistry, JobQueue, JobRunner, JobsSettings
from jobs.cli import cli
from tests.stores import STORE_KINDS, StoreTarget
from tests.support import wait_until


async def _run_jobs(target: StoreTarget) -> None:
    driver = target.open()
    queue = JobQueue(driver)
    registry = JobHandlerRegistry()

    async def slow(payload: object) -> None:
        await asyncio.sleep(0.06)

    async def breaks(payload: object) -> None:
        raise RuntimeError("no")

    registry.register("h.slow", slow)
    registry.register("h.bad", breaks, max_attempts=2, backoff=lambda attempt: 0)
    runner = JobRunner(driver, registry, JobsSettings(concurrency=4, poll_interval_ms=100))
    try:
        for n in range(4):
            await queue.enqueue("h.slow", {"n": n})
        await queue.enqueue("h.bad", {})
        runner.start()

        async def settled() -> bool:
            stats = await queue.stats()
            slow_done = "h.slow" in stats and stats["h.slow"].completed == 4
            return slow_done and "h.bad" in stats and stats["h.bad"].failed == 1

        await wait_until(settled, timeout=20, message="the jobs to settle")
    finally:
        await runner.close()
        await driver.close()


@pytest.mark.parametrize("kind", [k for k in STORE_KINDS if k.values[0] != "pgbouncer"])
def test_history_outlives_a_purge(kind: str, tmp_path: Path) -> None:
    target = StoreTarget.fresh(kind, tmp_path)
    option = "--namespace" if kind == "redis" else "--table-prefix"
    url = ["--url", target.url, option, target.namespace]
    try:
        asyncio.run(_run_jobs(target))
        purged = CliRunner().invoke(cli, ["purge", "--state", "completed", "--state", "failed",
                                          "--yes", *url])  # fmt: skip
        assert purged.stdout.strip() == "purged 5 job(s)", purged.output
        result = CliRunner().invoke(cli, ["stats", "--history", "--json", *url])
        assert result.exit_code == 0, result.output
        view = json.loads(result.stdout)
        assert view["types"] == []  # no job left
        rows = {row["type"]: row for row in view["history"]["types"]}
        slow, bad = rows["h.slow"], rows["h.bad"]
        assert (slow["completed"], slow["failed"], slow["retried"]) == (4, 0, 0)
        assert (bad["completed"], bad["failed"], bad["retried"]) == (0, 1, 1)
        assert slow["p50_ms"] == 100  # 60 ms runs: the (50, 100] bucket
        assert slow["mean_ms"] >= 60
        table = CliRunner().invoke(cli, ["stats", "--history", "24h", *url])
        assert "executions in the last 1d 0h" in table.stdout
        assert "<= 100ms" in table.stdout
    finally:
        asyncio.run(target.drop())
