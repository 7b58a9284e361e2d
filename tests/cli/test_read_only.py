"""Read-only commands create no store: on a SQLite file that is not there they exit 1 with one
line naming it and create nothing; on PostgreSQL they create no table; on Redis no key (click's
CliRunner; the real servers)."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from redis.asyncio import Redis
from sqlalchemy import inspect

from jobs.cli import cli
from orm_sqlalchemy import create_engine
from tests.stores import POSTGRES_URL, REDIS_URL

READ_COMMANDS = [
    pytest.param(["stats"], id="stats"),
    pytest.param(["stats", "--json"], id="stats-json"),
    pytest.param(["workers"], id="workers"),
    pytest.param(["jobs", "list"], id="jobs-list"),
    pytest.param(["jobs", "show", "0123456789abcdef"], id="jobs-show"),
    pytest.param(["healthcheck", "--min-workers", "0"], id="healthcheck"),
    pytest.param(["dashboard", "--port", "0"], id="dashboard"),
]


def run(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


@pytest.mark.parametrize("command", READ_COMMANDS)
@pytest.mark.parametrize("where", ["missing.db", "no/such/jobs.db"])
def test_a_missing_sqlite_file_is_named_in_one_line_and_not_created(
    tmp_path: Path, command: list[str], where: str
) -> None:
    database = tmp_path / where
    result = run(*command, "--url", f"sqlite+aiosqlite:///{database}")
    assert result.exit_code == 1, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1, result.output
    assert lines[0].startswith("Error: ")
    assert f"no SQLite database at '{database}'" in lines[0]
    assert "Traceback" not in result.output
    assert list(tmp_path.rglob("*")) == []


def _tables(prefix: str) -> list[str]:
    async def names() -> list[str]:
        engine = create_engine(POSTGRES_URL)
        try:
            async with engine.connect() as connection:
                found = await connection.run_sync(lambda c: inspect(c).get_table_names())
        finally:
            await engine.dispose()
        return [name for name in found if name.startswith(prefix)]

    return asyncio.run(names())


@pytest.mark.postgres
@pytest.mark.parametrize("command", READ_COMMANDS)
def test_postgresql_read_commands_create_no_table(command: list[str]) -> None:
    prefix = f"ro{uuid.uuid4().hex[:8]}_"
    result = run(*command, "--url", POSTGRES_URL, "--table-prefix", prefix)
    assert result.exit_code == 1, result.output
    (line,) = result.output.strip().splitlines()
    assert f"table '{prefix}queue' does not exist" in line
    assert _tables(prefix) == []


def _keys(namespace: str) -> list[bytes]:
    async def scan() -> list[bytes]:
        client = Redis.from_url(REDIS_URL)
        try:
            return [key async for key in client.scan_iter(match=f"*{namespace}*")]
        finally:
            await client.aclose()

    return asyncio.run(scan())


@pytest.mark.redis
@pytest.mark.parametrize("command", [c for c in READ_COMMANDS if c.id != "dashboard"])
def test_redis_read_commands_write_no_key(command: list[str]) -> None:
    namespace = f"ro{uuid.uuid4().hex[:8]}"
    result = run(*command, "--url", REDIS_URL, "--namespace", namespace)
    assert result.exit_code == (1 if command[:2] == ["jobs", "show"] else 0), result.output
    assert _keys(namespace) == []
