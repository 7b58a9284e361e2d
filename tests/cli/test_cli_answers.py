"""The command line answers what was asked, in the form it was stored, in one line when it
fails: JSON payloads in ``jobs show``; no asyncio traceback after a one-line error; a typo'd
``--type`` named with a did-you-mean; a ``redis://`` URL without ``--namespace`` whose default
namespace is empty names the namespaces that hold jobs; "starting bean ..." said once."""

from __future__ import annotations

import asyncio
import json
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from jobs import JobQueue
from jobs.cli import cli
from tests.cli.conftest import NEVERLOST, REPO, SpawnCli, cli_env
from tests.stores import POSTGRES_URL, REDIS_URL, StoreTarget


def _run(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


@pytest.fixture
def sqlite(tmp_path: Path) -> Iterator[StoreTarget]:
    target = StoreTarget.fresh("sqlite", tmp_path)
    yield target
    asyncio.run(target.drop())


def _url(target: StoreTarget) -> list[str]:
    return ["--url", target.url, "--table-prefix", target.namespace]


async def _enqueue(target: StoreTarget, job_type: str, payload: object) -> str:
    driver = target.open()
    try:
        job_id = await JobQueue(driver).enqueue(job_type, payload)
    finally:
        await driver.close()
    assert job_id is not None
    return job_id


def test_jobs_show_prints_the_payload_as_json(sqlite: StoreTarget) -> None:
    payload = {"to": "a@b.c", "flags": [True, None, 1.5], "name": "Zoë"}
    job_id = asyncio.run(_enqueue(sqlite, "email.send", payload))
    shown = _run("jobs", "show", job_id, *_url(sqlite))
    assert shown.exit_code == 0, shown.output
    panel = shown.stdout[shown.stdout.index("payload") :]
    body = "".join(line.strip("│╭╮╰╯─ ").strip() for line in panel.splitlines()[1:])
    assert json.loads(body) == payload  # JSON, not a Python repr (True, None, single quotes)
    assert "True" not in panel
    assert "None" not in panel


def _one_line_error(args: list[str]) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [NEVERLOST, *args], cwd=REPO, capture_output=True, text=True, timeout=60, check=False
    )
    return done


@pytest.mark.postgres
@pytest.mark.parametrize(
    "command",
    [["stats"], ["jobs", "list"], ["retry", "a1", "a2", "a3"], ["healthcheck"]],
    ids=["stats", "list", "retry", "healthcheck"],
)
def test_a_store_error_is_one_line_and_no_traceback_follows(command: list[str]) -> None:
    """stats asks two things at once: the first failure used to leave the other running, to
    be cancelled mid-connect as the process ended ("Future exception was never retrieved")."""
    missing = POSTGRES_URL.rsplit("/", 1)[0] + f"/no_such_db_{uuid.uuid4().hex[:8]}"
    done = _one_line_error([*command, "--url", missing])
    assert done.returncode == 1, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert "does not exist" in lines[0]
    assert lines[0].startswith(("Error:", "unhealthy"))


def test_an_unknown_type_is_named_with_a_did_you_mean(sqlite: StoreTarget) -> None:
    asyncio.run(_enqueue(sqlite, "email.send", {}))
    for args in (
        ["jobs", "list", "--type", "email.sned"],
        ["retry", "--failed", "--type", "email.sned"],
        ["purge", "--state", "failed", "--type", "email.sned", "--yes"],
    ):
        result = _run(*args, *_url(sqlite))
        assert result.exit_code == 1, result.output
        assert result.stderr.strip() == (
            "Error: no job type 'email.sned' in the store; did you mean 'email.send'?"
        ), args
    far = _run("jobs", "list", "--type", "zzz", *_url(sqlite))
    assert far.stderr.strip() == "Error: no job type 'zzz' in the store; types: email.send"
    known = _run("jobs", "list", "--type", "email.send", "--state", "failed", *_url(sqlite))
    assert known.exit_code == 0
    assert "no jobs" in known.stdout


def test_a_type_the_app_handles_is_known_with_no_job_stored(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CLI_TEST_TARGET", StoreTarget.fresh("sqlite", tmp_path).to_json())
    app = "tests.cli.app:CliTestApp"
    assert _run("jobs", "list", "--type", "cli.fail", app).exit_code == 0
    typo = _run("jobs", "list", "--type", "cli.fial", app)
    assert typo.exit_code == 1
    assert "did you mean 'cli.fail'?" in typo.stderr
    assert "the store or the APP's handlers" in typo.stderr


@pytest.mark.redis
def test_a_redis_url_without_namespace_names_the_namespaces_holding_jobs() -> None:
    """On a database of its own (db 13): the default namespace "jobs" must be empty there."""
    url = REDIS_URL.rsplit("/", 1)[0] + "/13"
    target = StoreTarget("redis", url, f"acting_{uuid.uuid4().hex[:8]}")
    asyncio.run(_enqueue(target, "email.send", {}))
    try:
        for command in (["jobs", "list"], ["stats"], ["stats", "--json"]):
            result = _run(*command, "--url", url)
            assert result.exit_code == 0, result.output
            assert (
                "nothing in the default namespace 'jobs'; namespaces holding jobs: "
                f"{target.namespace} (give --namespace)"
            ) in result.stderr
        named = _run("jobs", "list", "--url", url, "--namespace", target.namespace)
        assert "nothing in the default namespace" not in named.stderr
    finally:
        asyncio.run(target.drop())


async def test_a_bean_that_fails_to_start_is_named_once(
    tmp_path: Path, spawn_cli: SpawnCli
) -> None:
    env = cli_env(StoreTarget.fresh("sqlite", tmp_path))
    worker = await spawn_cli("worker", "tests.cli.acting_app:StartFailsApp", env=env)
    assert await worker.exit_code() == 1
    errors = [line for line in worker.log_text().splitlines() if line.startswith("Error:")]
    assert errors == [
        "Error: starting bean 'unreachable_service' failed: "
        "OSError: connection refused by 10.9.9.9:5432"
    ], worker.log_text()
