"""Stored strings reach the operator's terminal as text: Rich markup in a job type, key, error,
payload or worker host is printed literally (never a MarkupError, never a link), and control
characters (clear screen, window title, C1 codes) are shown escaped. Every read command, through
click's CliRunner, on a real SQLite store with such jobs planted through the driver."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from jobs import JobQueue
from jobs.cli import cli
from jobs.cli.errors import CliUsageError, CommandFailed, StoreError
from jobs.spi import WorkerRegistration
from tests.cli.hostile_app import HOSTILE_SCHEDULED_TYPE
from tests.stores import StoreTarget

CLEAR_SCREEN = "\x1b[2J\x1b[H"
WINDOW_TITLE = "\x1b]0;pwned\x07"
C1_CSI = "\x9b31m"
LINK = "[link=file:///etc/passwd]x[/link]"

CLOSING_TYPE = "[/bold]"
"""Alone, a closing tag with nothing open: Rich raised MarkupError on it."""
ESCAPING_TYPE = f"evil{CLEAR_SCREEN}{WINDOW_TITLE}"
LINK_TYPE = LINK
ERROR = f"boom [/] {LINK} {CLEAR_SCREEN}{WINDOW_TITLE}{C1_CSI}\nsecond line"
KEY = f"key[/]{WINDOW_TITLE}"
PAYLOAD = {"note": f"[/bold]{CLEAR_SCREEN}", "[link=x]y[/link]": WINDOW_TITLE}
HOST = f"host[/]{WINDOW_TITLE}"

RAW_CONTROLS = ("\x1b", "\x07", "\x9b")


@dataclass
class Planted:
    target: StoreTarget
    failed_id: str

    def run(self, *args: str) -> Result:
        url = ["--url", self.target.url, "--table-prefix", self.target.namespace]
        return CliRunner().invoke(cli, [*args, *url], catch_exceptions=False)


async def _plant(target: StoreTarget) -> str:
    driver = target.open()
    queue = JobQueue(driver)
    try:
        failed_id = await queue.enqueue(CLOSING_TYPE, PAYLOAD, key=KEY, max_attempts=1)
        (claimed,) = await driver.claim(1, 30_000, [CLOSING_TYPE])
        assert await driver.fail(claimed.id, claimed.lease_token, error=ERROR)
        await queue.enqueue(ESCAPING_TYPE, {"n": 1})
        await queue.enqueue(LINK_TYPE, {"n": 2})
        worker = WorkerRegistration(
            id=f"w{WINDOW_TITLE}", host=HOST, pid=7, types=(CLOSING_TYPE, ESCAPING_TYPE),
            concurrency=2, in_flight=0,
        )  # fmt: skip
        await driver.register_worker(worker, 60_000)
    finally:
        await driver.close()
    assert failed_id is not None
    return failed_id


@pytest.fixture
def planted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Planted:
    target = StoreTarget.fresh("sqlite", tmp_path)
    monkeypatch.setenv("CLI_TEST_TARGET", target.to_json())
    return Planted(target, asyncio.run(_plant(target)))


def assert_harmless(result: Result) -> str:
    assert result.exit_code == 0, result.output
    for control in RAW_CONTROLS:
        assert control not in result.output
    return result.stdout


def test_stats_prints_hostile_job_types_literally(planted: Planted) -> None:
    shown = assert_harmless(planted.run("stats"))
    assert CLOSING_TYPE in shown
    assert LINK in shown
    assert r"evil\x1b[2J\x1b[H\x1b]0;pwned\x07" in shown


def test_jobs_list_prints_types_and_errors_literally(planted: Planted) -> None:
    shown = assert_harmless(planted.run("jobs", "list"))
    assert CLOSING_TYPE in shown
    assert LINK in shown
    assert "boom [/] [link=file:///etc/pas" in shown  # the error's first line, cut to 40
    failed_only = assert_harmless(planted.run("jobs", "list", "--state", "failed"))
    assert "boom [/]" in failed_only


def test_jobs_show_prints_the_key_payload_and_error_literally(planted: Planted) -> None:
    shown = assert_harmless(planted.run("jobs", "show", planted.failed_id))
    assert CLOSING_TYPE in shown
    assert r"key[/]\x1b]0;pwned\x07" in shown
    assert LINK in shown
    assert r"\x1b[2J\x1b[H\x1b]0;pwned\x07\x9b31m" in shown  # the error, its controls escaped
    assert "\nsecond line" in shown.replace("│", "").replace(" \n", "\n").replace("\n ", "\n")
    assert "[link=x]y[/link]" in shown  # a payload key
    raw = assert_harmless(planted.run("jobs", "show", planted.failed_id, "--json"))
    as_json = json.loads(raw)  # --json is for programs: the data as stored, controls escaped
    assert as_json["payload"] == PAYLOAD
    assert as_json["key"] == KEY
    assert as_json["last_error"] == ERROR


def test_workers_prints_the_host_and_types_literally(planted: Planted) -> None:
    shown = assert_harmless(planted.run("workers"))
    assert r"host[/]\x1b]0;pwned\x07" in shown
    assert CLOSING_TYPE in shown


def test_schedules_prints_a_hostile_scheduled_type_literally(planted: Planted) -> None:
    result = CliRunner().invoke(
        cli, ["schedules", "tests.cli.hostile_app:HostileApp"], catch_exceptions=False
    )
    shown = assert_harmless(result)
    assert r"nightly[/bold]\x1b]0;pwned\x07" in shown
    assert HOSTILE_SCHEDULED_TYPE not in shown


def test_an_error_line_quoting_a_stored_string_prints_it_escaped() -> None:
    for error in (CommandFailed, StoreError, CliUsageError):
        assert error(f"not retried: x{WINDOW_TITLE} (failed)").format_message() == (
            r"not retried: x\x1b]0;pwned\x07 (failed)"
        )
