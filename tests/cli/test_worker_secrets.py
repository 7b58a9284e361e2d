"""The real ``neverlost worker``: its ready line, its /healthz and its startup failure name the
store without the URL's password (userinfo or ``?password=``)."""

from __future__ import annotations

import uuid

import httpx
import pytest

from jobs.testing.chaos import drop_store
from tests.cli.conftest import APP, SpawnCli, cli_env
from tests.stores import POSTGRES_URL, StoreTarget

HEALTH_PORT = 6621  # this suite's private ports: 6600-6699
DEAD_PORT = 6622
SECRET = "swordfish"


@pytest.mark.postgres
async def test_the_ready_line_and_healthz_show_no_password(spawn_cli: SpawnCli) -> None:
    prefix = f"w{uuid.uuid4().hex[:8]}_"
    target = StoreTarget("postgres", f"{POSTGRES_URL}?password={SECRET}", prefix)
    try:
        worker = await spawn_cli(
            "worker", APP, "--health-port", str(HEALTH_PORT), "--health-host", "127.0.0.1",
            env=cli_env(target),
        )  # fmt: skip
        await worker.wait_for_log("worker ready")
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{HEALTH_PORT}") as http:
            report = (await http.get("/healthz")).text
        worker.signal()
        assert await worker.exit_code() == 0, worker.log_text()
    finally:
        await drop_store(POSTGRES_URL, prefix)
    log = worker.log_text()
    ready = next(line for line in log.splitlines() if "worker ready" in line)
    assert f"SQLAlchemyJobStore({POSTGRES_URL}?password=***, table {prefix}queue)" in ready
    assert SECRET not in log
    assert SECRET not in report


async def test_a_store_unreachable_at_start_is_named_without_its_password(
    spawn_cli: SpawnCli,
) -> None:
    url = f"postgresql://app:{SECRET}@127.0.0.1:{DEAD_PORT}/app?password={SECRET}"
    worker = await spawn_cli(
        "worker", APP, "--startup-timeout", "1", env=cli_env(StoreTarget("postgres", url, "x_"))
    )
    assert await worker.exit_code(timeout=20) == 1
    log = worker.log_text()
    last = log.strip().splitlines()[-1]
    assert last.startswith("Error: store SQLAlchemyJobStore(postgresql+asyncpg://app:***@127.0.0.1")
    assert "/app?password=***, table x_queue)" in last
    assert SECRET not in log
