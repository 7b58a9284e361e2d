from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from redis.asyncio import Redis

from examples.orders.__main__ import main, run
from redis_jobs import Keys, delete_namespace
from tests.integration.redis.harness import REDIS_URL


def test_make_run_prints_the_guarantee(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--orders", "20"]) == 0
    out = capsys.readouterr().out
    assert "orders placed:          20" in out
    assert "  committed:            15" in out
    assert "  rolled back:          5" in out
    assert "emails sent:            15" in out
    assert "every committed order got exactly one email: True" in out
    assert "no rolled-back order got one:                True" in out
    assert "nightly report runs:" in out


async def test_orders_on_sqlite_with_jobs_on_sqlite(tmp_path: Path) -> None:
    summary = await run(f"sqlite+aiosqlite:///{tmp_path / 'orders.db'}", None, 12)
    assert summary["committed"] == 9
    assert summary["emails"] == 9
    assert summary["exactly_one_each"] is True
    assert summary["none_for_rolled_back"] is True
    jobs = summary["jobs"]
    assert isinstance(jobs, dict)
    assert (jobs["active"], jobs["failed"]) == (0, 0)
    assert jobs["completed"] == 9 + summary["report_runs"]  # the emails and the reports
    assert summary["retried_deliveries"] == 1  # order 5's first try failed
    assert summary["report_runs"] >= 1


@pytest.mark.redis
async def test_orders_in_sqlite_with_jobs_on_redis(tmp_path: Path) -> None:
    namespace = f"orders-test-{uuid.uuid4().hex}"
    try:
        summary = await run(
            f"sqlite+aiosqlite:///{tmp_path / 'orders.db'}", REDIS_URL, 12, namespace
        )
    finally:
        client = Redis.from_url(REDIS_URL)
        await delete_namespace(client, namespace)
        await client.aclose()
    assert summary["committed"] == 9
    assert summary["emails"] == 9
    assert summary["exactly_one_each"] is True
    jobs = summary["jobs"]
    assert isinstance(jobs, dict)
    assert jobs["completed"] == 9 + summary["report_runs"]


@pytest.mark.redis
async def test_a_run_on_its_own_redis_namespace_leaves_no_key(tmp_path: Path) -> None:
    summary = await run(f"sqlite+aiosqlite:///{tmp_path / 'orders.db'}", REDIS_URL, 4)
    namespace = summary["redis_namespace"]
    assert isinstance(namespace, str)
    assert namespace.startswith("orders-example-")
    client = Redis.from_url(REDIS_URL)
    try:
        assert [key async for key in client.scan_iter(match=Keys(namespace).pattern)] == []
    finally:
        await client.aclose()
