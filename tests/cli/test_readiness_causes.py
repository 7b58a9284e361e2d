"""Which start-up failures the worker waits out and which it reports at once
(``jobs.cli.readiness``), and a worker on a SQLite file whose directory does not exist."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest
from redis import exceptions as redis_errors

from jobs.cli.errors import StoreError
from jobs.cli.readiness import permanent_failure
from jobs.cli.worker import WorkerOptions, WorkerProcess
from jobs.errors import DriverError, StoreSchemaError, StoreUnavailableError
from tests.stores import StoreTarget


class _PgError(Exception):
    def __init__(self, message: str, sqlstate: str) -> None:
        super().__init__(message)
        self.sqlstate = sqlstate


def _wrapped(cause: BaseException) -> DriverError:
    error = DriverError("SQLAlchemyJobStore(...) failed a statement")
    error.__cause__ = cause
    return error


@pytest.mark.parametrize(
    ("error", "fix"),
    [
        (_wrapped(_PgError('database "shop" does not exist', "3D000")), "createdb shop"),
        (_wrapped(_PgError('password authentication failed for user "app"', "28P01")), "password"),
        (_wrapped(_PgError('role "app" does not exist', "28000")), "user or password"),
        (redis_errors.AuthenticationError("invalid username-password pair"), "Redis refused"),
        (StoreSchemaError("table 'jobs_queue' has no column 'stalls'"), "tables up to date"),
    ],
)
def test_failures_waiting_cannot_cure_name_their_fix(error: BaseException, fix: str) -> None:
    found = permanent_failure(error)
    assert found is not None
    assert fix in found[1]


@pytest.mark.parametrize(
    "error",
    [
        StoreUnavailableError("cannot reach its database: Connection refused"),
        _wrapped(_PgError("the database system is starting up", "57P03")),
        _wrapped(ConnectionRefusedError(111, "Connection refused")),
        redis_errors.ConnectionError("Error 111 connecting to 127.0.0.1:6379"),
        _wrapped(FileNotFoundError(2, "No such file or directory")),  # a server's socket path
    ],
)
def test_failures_that_may_pass_are_waited_out(error: BaseException) -> None:
    assert permanent_failure(error) is None


async def test_a_sqlite_file_in_a_missing_directory_exits_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = StoreTarget("sqlite", f"sqlite+aiosqlite:///{tmp_path / 'gone' / 'jobs.db'}", "x_")
    monkeypatch.setenv("CLI_TEST_TARGET", target.to_json())
    options = WorkerOptions(app="tests.cli.app:CliTestApp", startup_timeout_s=60)
    started = time.monotonic()
    with pytest.raises(StoreError) as raised:
        await asyncio.wait_for(WorkerProcess(options).run(), 30)
    assert time.monotonic() - started < 20
    message = raised.value.message
    assert message.startswith("store SQLAlchemyJobStore(sqlite+aiosqlite:///")
    assert "(job driver, scheduler's store) cannot be used" in message
    assert "check its directory exists" in message
