"""The worker's health: /healthz follows its Redis going away and coming back, and names a
handler stuck past its timeout; a store that is unreachable at start exits 1 with one line
naming it."""

from __future__ import annotations

import json
from pathlib import Path

import httpx

from jobs import JobQueue
from tests.cli.conftest import APP, SpawnCli, cli_env
from tests.integration.redis.redis_server import RedisServer
from tests.stores import StoreTarget
from tests.support import wait_until

REDIS_PORT = 6610  # this suite's private ports: 6600-6699
HEALTH_PORT = 6611
DEAD_PORT = 6612
STUCK_HEALTH_PORT = 6613
HAZARD_APP = "tests.cli.app:CliHazardApp"


async def test_healthz_turns_503_when_the_workers_redis_goes_away_and_200_when_it_returns(
    spawn_cli: SpawnCli, tmp_path: Path
) -> None:
    server = RedisServer(tmp_path / "redis")
    server.port = REDIS_PORT
    await server.start()
    try:
        target = StoreTarget("redis", server.url, "cli-health")
        worker = await spawn_cli(
            "worker", APP, "--health-port", str(HEALTH_PORT), "--health-host", "127.0.0.1",
            env=cli_env(target),
        )  # fmt: skip
        await worker.wait_for_log("worker ready")
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{HEALTH_PORT}") as http:

            async def status_is(code: int) -> bool:
                return (await http.get("/healthz")).status_code == code

            await wait_until(lambda: status_is(200), timeout=10, interval=0.1, message="200")
            healthy = (await http.get("/healthz")).json()
            assert healthy["healthy"] is True
            assert healthy["reason"] is None
            runner = healthy["services"]["job runner"]
            assert runner["running"] is True
            assert runner["store_answered_ms_ago"] <= runner["store_window_ms"] == 3_000
            assert runner["in_flight"] == 0
            assert set(healthy["services"]) == {"job runner", "job scheduler"}  # no outbox here

            await server.stop()
            # Three heartbeat intervals of the app's 3 s lease (1 s each), and some slack.
            await wait_until(lambda: status_is(503), timeout=10, interval=0.1, message="503")
            down = (await http.get("/healthz")).json()
            assert down["healthy"] is False
            assert down["reason"].startswith("job runner: its store RedisJobDriver(")
            assert "namespace 'cli-health'" in down["reason"]
            assert down["services"]["job runner"]["store_error"]

            await server.start()
            await wait_until(lambda: status_is(200), timeout=15, interval=0.1, message="200 again")
        worker.signal()
        assert await worker.exit_code() == 0, worker.log_text()
    finally:
        await server.stop()


async def test_a_store_unreachable_at_start_exits_1_naming_it_within_the_startup_timeout(
    spawn_cli: SpawnCli,
) -> None:
    dead = StoreTarget("redis", f"redis://127.0.0.1:{DEAD_PORT}/0", "cli-dead")
    worker = await spawn_cli(
        "worker", APP, "--startup-timeout", "2", "--log-json", env=cli_env(dead)
    )
    assert await worker.exit_code(timeout=20) == 1
    lines = worker.log_text().strip().splitlines()
    retries = [json.loads(line)["record"]["message"] for line in lines[:-1]]
    assert retries
    assert all("not answering" in message for message in retries)
    last = lines[-1]
    assert last.startswith("Error: store RedisJobDriver(127.0.0.1:6612 db 0, namespace 'cli-dead')")
    assert "unreachable after 2 s" in last
    assert "Traceback" not in worker.log_text()


async def test_healthz_names_a_sync_handler_that_ignored_its_timeout_until_its_thread_returns(
    spawn_cli: SpawnCli, tmp_path: Path
) -> None:
    target = StoreTarget.fresh("sqlite", tmp_path)
    driver = target.open()
    try:
        worker = await spawn_cli(
            "worker", HAZARD_APP, "--health-port", str(STUCK_HEALTH_PORT),
            "--health-host", "127.0.0.1", env=cli_env(target),
        )  # fmt: skip
        await worker.wait_for_log("worker ready")
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{STUCK_HEALTH_PORT}") as http:

            async def status_is(code: int) -> bool:
                return (await http.get("/healthz")).status_code == code

            await wait_until(lambda: status_is(200), timeout=10, interval=0.1, message="200")
            job_id = await JobQueue(driver).enqueue("cli.stuck", {"s": 4})
            await wait_until(lambda: status_is(503), timeout=10, interval=0.1, message="503")
            stuck = (await http.get("/healthz")).json()
            assert f"job {job_id} (cli.stuck): its handler ignored its interruption" in (
                stuck["reason"]
            )
            assert "in a worker thread" in stuck["reason"]
            assert stuck["services"]["job runner"]["stuck_handlers"] == 1
            info = await driver.get_job(str(job_id))
            assert info is not None
            assert info.state == "failed"
            assert (info.last_error or "").startswith("JobTimeoutError")
            await wait_until(lambda: status_is(200), timeout=15, interval=0.1, message="200 again")
        worker.signal()
        assert await worker.exit_code() == 0, worker.log_text()
    finally:
        await driver.close()
