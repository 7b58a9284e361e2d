"""``--redact-keys`` on ``jobs show`` and ``jobs list``: the named payload keys, at any depth and
in any case, are printed as "***" (tables and --json); the stored payload is unchanged (click's
CliRunner on a real SQLite store)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from jobs import JobQueue
from jobs.cli import cli
from tests.stores import StoreTarget

PAYLOAD = {"user": "ann", "password": "hunter2", "cards": [{"CVV": "123", "last4": "4242"}]}


async def _plant(target: StoreTarget) -> str:
    driver = target.open()
    try:
        job_id = await JobQueue(driver).enqueue("user.create", PAYLOAD)
    finally:
        await driver.close()
    assert job_id is not None
    return job_id


@pytest.fixture
def store(tmp_path: Path) -> tuple[StoreTarget, str]:
    target = StoreTarget.fresh("sqlite", tmp_path)
    return target, asyncio.run(_plant(target))


def run(target: StoreTarget, *args: str) -> Result:
    url = ["--url", target.url, "--table-prefix", target.namespace]
    result = CliRunner().invoke(cli, [*args, *url], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result


def test_jobs_show_hides_the_named_keys_at_any_depth(store: tuple[StoreTarget, str]) -> None:
    target, job_id = store
    table = run(target, "jobs", "show", job_id, "--redact-keys", "password,cvv").stdout
    assert "hunter2" not in table
    assert '"123"' not in table
    assert '"password": "***"' in table
    assert '"CVV": "***"' in table
    assert "4242" in table
    redacted = run(target, "jobs", "show", job_id, "--json", "--redact-keys", "password")
    shown = json.loads(redacted.stdout)
    assert shown["payload"] == {**PAYLOAD, "password": "***"}
    assert json.loads(run(target, "jobs", "show", job_id, "--json").stdout)["payload"] == PAYLOAD


def test_jobs_list_json_hides_the_named_keys(store: tuple[StoreTarget, str]) -> None:
    target, _ = store
    listed = json.loads(run(target, "jobs", "list", "--json", "--redact-keys", "password").stdout)
    assert [job["payload"]["password"] for job in listed["jobs"]] == ["***"]


def test_the_keys_may_come_from_the_environment(
    store: tuple[StoreTarget, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    target, job_id = store
    monkeypatch.setenv("NEVERLOST_REDACT_KEYS", "password")
    assert "hunter2" not in run(target, "jobs", "show", job_id).stdout
