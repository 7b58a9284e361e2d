"""Server faults on private servers: the store goes away and comes back, nothing acknowledged is
lost, failed enqueues raise StoreUnavailableError, and no worker exits."""

from __future__ import annotations

from pathlib import Path

import pytest

from jobs.testing.chaos import ChaosPlan, WorkerOptions
from jobs.testing.chaos.server_faults import postgres_faults, redis_faults

PLAN = ChaosPlan(
    workers=2, jobs=600, kill_every_s=1.5, deadline_s=120,
    options=WorkerOptions(lease_ms=2_000, concurrency=4, handler_ms=20),
)  # fmt: skip

pytestmark = [pytest.mark.chaos, pytest.mark.slow, pytest.mark.timeout(240)]


@pytest.mark.redis
async def test_redis_client_kill_pause_and_restart_lose_nothing_acknowledged(
    tmp_path: Path,
) -> None:
    verdict = await redis_faults(PLAN, tmp_path)
    assert verdict.problems == []
    assert (verdict.lost, verdict.unexpected) == (0, 0), verdict.lost_jobs
    assert verdict.jobs >= PLAN.jobs // 2  # most enqueues were acknowledged


@pytest.mark.postgres
async def test_postgres_terminate_and_restart_lose_nothing_acknowledged(tmp_path: Path) -> None:
    verdict = await postgres_faults(PLAN, tmp_path)
    assert verdict.problems == []
    assert (verdict.lost, verdict.unexpected) == (0, 0), verdict.lost_jobs
    assert verdict.jobs >= PLAN.jobs // 2
