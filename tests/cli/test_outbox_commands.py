"""``neverlost stats APP`` shows the APP's outbox (issue 33): unpublished entries, the oldest
one's age, failed hand-overs, live relays, and NO RELAY when entries wait and no relay is
alive; ``neverlost outbox list|show|retry`` finds a stuck entry and makes it claimable. On the
real SQLite and PostgreSQL outbox stores, through ``tests.cli.app:CliOutboxApp`` (its outbox on
the target's database), the commands run in-process by click's CliRunner."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from jobs.cli import cli
from jobs.spi import RelayRegistration
from orm_sqlalchemy import SQLAlchemyOutboxStore, SQLAlchemyTransactionManager, create_engine
from tests.stores import StoreTarget
from tests.support import wait_until

OUTBOX_APP = "tests.cli.app:CliOutboxApp"


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def target(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[StoreTarget]:
    target = StoreTarget.fresh(request.param, tmp_path)
    monkeypatch.setenv("CLI_TEST_TARGET", target.to_json())
    monkeypatch.setenv("CLI_TEST_OUTBOX_PREFIX", f"{target.namespace}ob_")
    try:
        yield target
    finally:
        asyncio.run(target.drop())


async def _outbox(target: StoreTarget, work: Any) -> None:
    engine = create_engine(target.url)
    tm = SQLAlchemyTransactionManager(engine)
    store = SQLAlchemyOutboxStore(tm, table_prefix=f"{target.namespace}ob_")
    try:
        await store.create_schema()
        await work(tm, store)
    finally:
        await store.close()
        await engine.dispose()


def _stats(*args: str) -> Any:
    result = CliRunner().invoke(cli, ["stats", OUTBOX_APP, *args], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout) if "--json" in args else result.stdout


def test_waiting_entries_without_a_relay_are_flagged_no_relay(target: StoreTarget) -> None:
    assert _stats("--json")["outbox"] == {
        "unpublished": 0, "oldest_age_ms": None, "with_errors": 0, "published_last_hour": 0,
        "relays": 0, "no_relay": False,
    }  # fmt: skip

    async def waiting(tm: SQLAlchemyTransactionManager, store: SQLAlchemyOutboxStore) -> None:
        async with tm.transaction():
            for n in range(3):
                await store.append("cli.sleep", {"ms": n})
        entry, *_ = await store.claim(1, 60_000)
        await store.release(entry.id, entry.lease_token, delay_ms=60_000, error="broker down")

    asyncio.run(_outbox(target, waiting))
    outbox = _stats("--json")["outbox"]
    assert (outbox["unpublished"], outbox["with_errors"], outbox["relays"]) == (3, 1, 0)
    assert outbox["oldest_age_ms"] >= 0
    assert outbox["no_relay"] is True
    table = _stats()
    line = next(line for line in table.splitlines() if line.startswith("outbox:"))
    assert "3 unpublished" in line
    assert "1 with errors" in line
    assert "NO RELAY" in line


def test_a_live_relay_is_counted_and_clears_the_flag(target: StoreTarget) -> None:
    async def relay_alive(tm: SQLAlchemyTransactionManager, store: SQLAlchemyOutboxStore) -> None:
        async with tm.transaction():
            await store.append("cli.sleep", {"ms": 0})
        await store.register_relay(RelayRegistration(id="r1", host="node-a", pid=7), 60_000)

    asyncio.run(_outbox(target, relay_alive))
    outbox = _stats("--json")["outbox"]
    assert (outbox["unpublished"], outbox["relays"], outbox["no_relay"]) == (1, 1, False)
    assert "NO RELAY" not in _stats()


def test_stats_of_an_app_without_an_outbox_has_none(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CLI_TEST_TARGET", StoreTarget.fresh("sqlite", tmp_path).to_json())
    result = CliRunner().invoke(cli, ["stats", "tests.cli.app:CliTestApp", "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["outbox"] is None


def _outbox_cli(*args: str) -> Any:
    result = CliRunner().invoke(cli, ["outbox", *args], catch_exceptions=False)
    if "--json" in args and result.exit_code == 0:
        return json.loads(result.stdout)
    return result


def test_outbox_list_show_and_retry_a_stuck_entry(target: StoreTarget) -> None:
    ids: dict[str, str] = {}

    async def stuck(tm: SQLAlchemyTransactionManager, store: SQLAlchemyOutboxStore) -> None:
        async with tm.transaction():
            ids["stuck"] = str(await store.append("cli.sleep", {"order": 7}, key="order:7"))
        # Claimed while it is the only one, and the next appended a millisecond later by the
        # store's clock: entries of one millisecond are claimed and listed in id order.
        (entry,) = await store.claim(1, 60_000)
        assert entry.id == ids["stuck"]
        await store.release(entry.id, entry.lease_token, delay_ms=600_000, error="broker down")

        async def stuck_is_older() -> bool:
            return (await store.oldest_unpublished_age_ms() or 0) >= 1

        await wait_until(stuck_is_older, timeout=5, message="the store's clock to move on")
        async with tm.transaction():
            ids["waiting"] = str(await store.append("cli.fail", {"order": 8}))

    asyncio.run(_outbox(target, stuck))
    listed = _outbox_cli("list", OUTBOX_APP, "--json")
    assert [e["id"] for e in listed["entries"]] == [ids["stuck"], ids["waiting"]]
    assert listed["next_cursor"] is None
    (failing,) = _outbox_cli("list", OUTBOX_APP, "--state", "failing", "--json")["entries"]
    assert (failing["id"], failing["last_error"]) == (ids["stuck"], "broker down")
    table = _outbox_cli("list", OUTBOX_APP, "--state", "failing")
    assert table.exit_code == 0, table.output
    assert "broker down" in table.stdout

    shown = _outbox_cli("show", OUTBOX_APP, ids["stuck"], "--json")
    assert (shown["state"], shown["key"], shown["payload"], shown["attempts"]) == (
        "failing", "order:7", {"order": 7}, 1,
    )  # fmt: skip
    text = _outbox_cli("show", OUTBOX_APP, ids["stuck"])
    assert text.exit_code == 0, text.output
    assert '"order": 7' in text.stdout
    assert "broker down" in text.stdout
    missing = _outbox_cli("show", OUTBOX_APP, "no-such-entry")
    assert missing.exit_code == 1
    assert "no outbox entry 'no-such-entry'" in missing.output

    retried = _outbox_cli("retry", OUTBOX_APP, ids["stuck"])
    assert retried.exit_code == 0, retried.output
    assert f"retried outbox entry {ids['stuck']}" in retried.stdout

    async def claimable(tm: SQLAlchemyTransactionManager, store: SQLAlchemyOutboxStore) -> None:
        claimed = await store.claim(10, 60_000)
        assert {e.id for e in claimed} == {ids["stuck"], ids["waiting"]}
        (stuck,) = [e for e in claimed if e.id == ids["stuck"]]
        assert await store.mark_published(stuck.id, stuck.lease_token)

    asyncio.run(_outbox(target, claimable))
    again = _outbox_cli("retry", OUTBOX_APP, ids["stuck"], "--json")
    assert again.exit_code == 1  # published now: not retried
    assert "not retried (published or unknown)" in again.output
    actions = CliRunner().invoke(cli, ["audit", "list", OUTBOX_APP, "--json"])
    assert actions.exit_code == 0, actions.output
    recorded = [a for a in json.loads(actions.stdout)["actions"] if a["action"] == "outbox_retry"]
    assert [(a["target"], a["count"], a["source"]) for a in recorded] == [
        (f"outbox entry {ids['stuck']}", 0, "cli"), (f"outbox entry {ids['stuck']}", 1, "cli"),
    ]  # fmt: skip


def test_outbox_commands_need_an_app_with_an_outbox(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = StoreTarget.fresh("sqlite", tmp_path)
    monkeypatch.setenv("CLI_TEST_TARGET", target.to_json())
    no_outbox = _outbox_cli("list", "tests.cli.app:CliTestApp")
    assert no_outbox.exit_code == 2
    assert "declares no outbox store" in no_outbox.output
    by_url = _outbox_cli("list", "--url", target.url)
    assert by_url.exit_code == 2
    assert "give APP, not --url" in by_url.output


def test_a_failing_outbox_store_is_named_by_stats(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CLI_TEST_TARGET", StoreTarget.fresh("sqlite", tmp_path).to_json())
    monkeypatch.setenv("CLI_TEST_OUTBOX_URL", "postgresql+asyncpg://postgres@127.0.0.1:6633/app")
    result = CliRunner().invoke(cli, ["stats", OUTBOX_APP, "--json"])
    assert result.exit_code == 1
    assert result.output.startswith("Error: outbox store SQLAlchemyOutboxStore(postgresql")
    assert "6633" in result.output
