"""A worker says "worker ready" only once every store it will use answers (issue 33): the job
driver, the outbox store and the scheduler's store. A failure that waiting cannot cure (a
database that does not exist, a role the server refuses) exits 1 at once with one line naming
the store, its role and the fix; a store that does not answer exits 1 after --startup-timeout.
/healthz reports each store. The real ``neverlost`` in a subprocess, with the app's outbox on
a PostgreSQL URL of the test's choosing (``CLI_TEST_OUTBOX_URL``) and its jobs on SQLite."""

from __future__ import annotations

import time
from pathlib import Path

import httpx
import pytest

from tests.cli.conftest import SpawnCli, cli_env
from tests.stores import POSTGRES_URL, StoreTarget
from tests.support import wait_until

OUTBOX_APP = "tests.cli.app:CliOutboxApp"
DEAD_PORT = 6631  # nothing listens there (this suite's private ports: 6600-6699)
HEALTH_PORT = 6632
SERVER = POSTGRES_URL.rsplit("/", 1)[0]


def _env(tmp_path: Path, outbox_url: str) -> dict[str, str]:
    target = StoreTarget.fresh("sqlite", tmp_path)
    env = cli_env(target)
    env["CLI_TEST_OUTBOX_URL"] = outbox_url
    env["CLI_TEST_OUTBOX_PREFIX"] = f"{target.namespace}ob_"
    return env


@pytest.mark.postgres
@pytest.mark.parametrize(
    ("url", "problem", "fix"),
    [
        pytest.param(
            f"{SERVER}/no_such_db", 'database "no_such_db" does not exist',
            "create the database", id="missing-database",
        ),
        pytest.param(
            SERVER.replace("postgres@", "no_such_role@") + "/test",
            'role "no_such_role" does not exist', "fix the user or password", id="unknown-role",
        ),
    ],
)  # fmt: skip
async def test_an_outbox_database_that_cannot_be_used_exits_1_at_once_naming_it(
    spawn_cli: SpawnCli, tmp_path: Path, url: str, problem: str, fix: str
) -> None:
    started = time.monotonic()
    worker = await spawn_cli(
        "worker", OUTBOX_APP, "--startup-timeout", "60", env=_env(tmp_path, url)
    )
    assert await worker.exit_code(timeout=30) == 1
    assert time.monotonic() - started < 20  # not the 60 s of the startup timeout
    log = worker.log_text()
    assert "worker ready" not in log
    assert "Traceback" not in log
    last = log.strip().splitlines()[-1]
    assert last.startswith("Error: store SQLAlchemyOutboxStore(postgresql+asyncpg://")
    assert "(outbox store) cannot be used" in last
    assert problem in last
    assert fix in last


async def test_an_outbox_that_does_not_answer_exits_1_after_the_startup_timeout(
    spawn_cli: SpawnCli, tmp_path: Path
) -> None:
    url = f"postgresql+asyncpg://postgres@127.0.0.1:{DEAD_PORT}/app"
    env = _env(tmp_path, url)
    worker = await spawn_cli("worker", OUTBOX_APP, "--startup-timeout", "2", env=env)
    assert await worker.exit_code(timeout=30) == 1
    log = worker.log_text()
    assert "worker ready" not in log
    assert "(outbox store) not answering" in log
    last = log.strip().splitlines()[-1]
    assert last.startswith(
        f"Error: store SQLAlchemyOutboxStore(postgresql+asyncpg://postgres@127.0.0.1:{DEAD_PORT}"
    )
    assert "unreachable after 2 s (outbox store)" in last


async def test_without_the_relay_the_outbox_store_is_not_waited_for(
    spawn_cli: SpawnCli, tmp_path: Path
) -> None:
    url = f"postgresql+asyncpg://postgres@127.0.0.1:{DEAD_PORT}/app"
    worker = await spawn_cli(
        "worker", OUTBOX_APP, "--no-relay", "--startup-timeout", "2", env=_env(tmp_path, url)
    )
    await worker.wait_for_log("worker ready")
    worker.signal()
    assert await worker.exit_code() == 0, worker.log_text()


@pytest.mark.slow
@pytest.mark.postgres
async def test_healthz_reports_the_job_driver_the_outbox_store_and_the_schedulers_store(
    spawn_cli: SpawnCli, tmp_path: Path
) -> None:
    worker = await spawn_cli(
        "worker", OUTBOX_APP, "--health-port", str(HEALTH_PORT), "--health-host", "127.0.0.1",
        env=_env(tmp_path, POSTGRES_URL),
    )  # fmt: skip
    await worker.wait_for_log("worker ready")
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{HEALTH_PORT}") as http:

        async def healthy() -> bool:
            return (await http.get("/healthz")).status_code == 200

        await wait_until(healthy, timeout=10, interval=0.1, message="200")
        stores = (await http.get("/healthz")).json()["stores"]
    assert set(stores) == {"job driver", "outbox store", "scheduler's store"}
    assert all(store["answering"] for store in stores.values()), stores
    worker.signal()
    assert await worker.exit_code() == 0, worker.log_text()
