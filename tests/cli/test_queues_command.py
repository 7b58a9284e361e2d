"""``neverlost queues list|pause|resume``: pauses held in the store, listed, audited; a bad name
is one line, exit 2."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from jobs import JobQueue
from jobs.cli import cli
from tests.stores import STORE_KINDS, StoreTarget


def _run(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


async def _enqueue(target: StoreTarget) -> None:
    driver = target.open()
    try:
        await JobQueue(driver).enqueue("email.send", {}, queue="emails")
    finally:
        await driver.close()


@pytest.mark.parametrize("kind", [k for k in STORE_KINDS if k.values[0] != "pgbouncer"])
def test_pause_list_resume_and_audit(kind: str, tmp_path: Path) -> None:
    target = StoreTarget.fresh(kind, tmp_path)
    option = "--namespace" if kind == "redis" else "--table-prefix"
    url = ["--url", target.url, option, target.namespace]
    try:
        asyncio.run(_enqueue(target))
        paused = _run("queues", "pause", "emails", *url)
        assert paused.exit_code == 0, paused.output
        assert paused.stdout.strip() == "paused queue emails"
        assert _run("queues", "pause", "emails", *url).stdout.strip() == (
            "queue emails was already paused"
        )
        listed = _run("queues", "list", "--json", *url)
        assert listed.exit_code == 0, listed.output
        rows = {q["name"]: q for q in json.loads(listed.stdout)["queues"]}
        assert rows["emails"]["paused"] is True
        assert rows["emails"]["due"] == 1
        assert rows["default"]["paused"] is False
        table = _run("queues", "list", *url)
        assert "PAUSED" in table.stdout
        assert _run("queues", "resume", "emails", *url).stdout.strip() == "resumed queue emails"
        actions = json.loads(_run("audit", "list", "--json", *url).stdout)["actions"]
        assert [a["action"] for a in actions[:3]] == ["resume_queue", "pause_queue", "pause_queue"]
        assert actions[0]["target"] == "queue emails"
        assert actions[0]["source"] == "cli"
        bad = _run("queues", "pause", "two words", *url)
        assert bad.exit_code == 2
        assert len(bad.stderr.strip().splitlines()) == 1
    finally:
        asyncio.run(target.drop())
