"""``neverlost audit list``: the actions taken through ``neverlost`` (and the API) are in the
store's audit trail, with the shell's user@host and source "cli"."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from jobs import JobQueue
from jobs.audit import process_actor_name
from jobs.cli import cli
from tests.stores import STORE_KINDS, StoreTarget


def _run(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


async def _failed_job(target: StoreTarget) -> str:
    driver = target.open()
    try:
        job_id = await JobQueue(driver).enqueue("email.send", {}, max_attempts=1)
        (claimed,) = await driver.claim(1, 30_000, ["email.send"])
        assert await driver.fail(claimed.id, claimed.lease_token, error="boom")
    finally:
        await driver.close()
    assert job_id is not None
    return job_id


@pytest.mark.parametrize("kind", [k for k in STORE_KINDS if k.values[0] != "pgbouncer"])
def test_cli_actions_are_listed_by_audit_list(kind: str, tmp_path: Path) -> None:
    target = StoreTarget.fresh(kind, tmp_path)
    option = "--namespace" if kind == "redis" else "--table-prefix"
    url = ["--url", target.url, option, target.namespace]
    try:
        job_id = asyncio.run(_failed_job(target))
        assert _run("retry", job_id, *url).exit_code == 0
        assert _run("cancel", job_id, *url).exit_code == 0
        assert _run("purge", "--state", "cancelled", "--yes", *url).exit_code == 0
        listed = _run("audit", "list", "--json", *url)
        assert listed.exit_code == 0, listed.output
        actions = json.loads(listed.stdout)["actions"]
        me = process_actor_name()
        fields = ("action", "target", "actor", "source", "count")
        assert [tuple(a[f] for f in fields) for a in actions] == [
            ("purge", "cancelled jobs", me, "cli", 1),
            ("cancel", job_id, me, "cli", 1),
            ("retry", job_id, me, "cli", 1),
        ]
        table = _run("audit", "list", *url)
        assert table.exit_code == 0
        assert "cancelled jobs" in table.stdout
        assert job_id in table.stdout
    finally:
        asyncio.run(target.drop())
