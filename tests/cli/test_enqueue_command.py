"""``neverlost enqueue TYPE --payload JSON``: the job as the application would enqueue it;
given APP, its payload validated against the handler's job definition before anything is
written; every mistake one line, exit 2, nothing stored."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from jobs import JobQueue
from jobs.cli import cli
from jobs.spi import JobInfo
from tests.stores import STORE_KINDS, StoreTarget

TYPED_APP = "tests.cli.acting_app:TypedApp"


def _run(*args: str, input: str | None = None) -> Result:
    return CliRunner().invoke(cli, list(args), input=input, catch_exceptions=False)


@pytest.fixture
def sqlite(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[StoreTarget]:
    target = StoreTarget.fresh("sqlite", tmp_path)
    monkeypatch.setenv("CLI_TEST_TARGET", target.to_json())  # TypedApp's store
    yield target
    asyncio.run(target.drop())


async def _jobs(target: StoreTarget) -> list[JobInfo]:
    driver = target.open()
    try:
        return (await JobQueue(driver).list_jobs(limit=100)).jobs
    finally:
        await driver.close()


def _stored(target: StoreTarget) -> list[JobInfo]:
    return asyncio.run(_jobs(target))


@pytest.mark.parametrize("kind", [k for k in STORE_KINDS if k.values[0] != "pgbouncer"])
def test_enqueue_by_url_stores_the_job_with_its_options(kind: str, tmp_path: Path) -> None:
    target = StoreTarget.fresh(kind, tmp_path)
    option = "--namespace" if kind == "redis" else "--table-prefix"
    url = ["--url", target.url, option, target.namespace]
    try:
        done = _run(
            "enqueue", "email.send", "--payload", '{"to": "a@b.c", "n": [1, null]}',
            "--key", "welcome:7", "--delay", "5m", "--max-attempts", "4", "--priority", "-7",
            "--json", *url,
        )  # fmt: skip
        assert done.exit_code == 0, done.output
        job_id = json.loads(done.stdout)["id"]
        (job,) = _stored(target)
        assert (job.id, job.type, job.state) == (job_id, "email.send", "pending")
        assert job.key == "welcome:7"
        assert job.payload == {"to": "a@b.c", "n": [1, None]}
        assert (job.max_attempts, job.priority) == (4, -7)
        assert job.created_at is not None
        assert 299 <= (job.run_at - job.created_at).total_seconds() <= 301

        again = _run("enqueue", "email.send", "--key", "welcome:7", *url)
        assert again.exit_code == 0, again.output
        assert again.stdout.strip() == f"not enqueued: key 'welcome:7' is held by job {job_id}"
        assert len(_stored(target)) == 1
    finally:
        asyncio.run(target.drop())


def test_enqueue_reads_the_payload_from_a_file_or_stdin(
    sqlite: StoreTarget, tmp_path: Path
) -> None:
    url = ["--url", sqlite.url, "--table-prefix", sqlite.namespace]
    path = tmp_path / "payload.json"
    path.write_text('{"from": "file"}')
    assert _run("enqueue", "t", "--payload", f"@{path}", *url).exit_code == 0
    assert _run("enqueue", "t", "--payload", "-", *url, input='{"from": "stdin"}').exit_code == 0
    assert _run("enqueue", "t", *url).exit_code == 0  # no payload: null
    assert sorted(json.dumps(job.payload) for job in _stored(sqlite)) == sorted(
        ['{"from": "file"}', '{"from": "stdin"}', "null"]
    )


def test_enqueue_validates_the_payload_against_the_apps_job_definition(
    sqlite: StoreTarget,
) -> None:
    bad = _run("enqueue", "receipt.send", "--payload", '{"invoice_id": "seven"}', TYPED_APP)
    assert bad.exit_code == 2
    assert bad.stderr.strip() == (
        "Error: payload for job 'receipt.send' does not fit Receipt: payload[\"invoice_id\"]: "
        "Input should be a valid integer, unable to parse string as an integer"
    )
    assert _stored(sqlite) == []

    good = _run("enqueue", "receipt.send", "--payload", '{"invoice_id": "7"}', TYPED_APP)
    assert good.exit_code == 0, good.output
    (job,) = _stored(sqlite)
    assert job.payload == {"invoice_id": 7, "email": None}  # as the model dumps it
    assert job.max_attempts == 5  # the definition's


def test_enqueue_given_app_names_an_unknown_type_and_enqueues_it_only_when_asked(
    sqlite: StoreTarget,
) -> None:
    typo = _run("enqueue", "receipt.sned", "--payload", "{}", TYPED_APP)
    assert typo.exit_code == 2
    assert typo.stderr.strip() == (
        "Error: the APP has no handler for job type 'receipt.sned'; did you mean 'receipt.send'? "
        "(--any-type enqueues it anyway, for a worker of another application)"
    )
    assert _stored(sqlite) == []
    forced = _run("enqueue", "billing.close", "--any-type", TYPED_APP)
    assert forced.exit_code == 0, forced.output
    assert [job.type for job in _stored(sqlite)] == ["billing.close"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--payload", "{'a': 1}"],
            "Error: --payload is not JSON: Expecting property name enclosed in double quotes "
            "(line 1, column 2); write e.g. --payload '{\"invoice_id\": 7}'",
        ),
        (["--payload", "@/no/such/file.json"], "Error: --payload @/no/such/file.json: "
         "No such file or directory"),
        (["--payload", "NaN"], "Error: payload: float nan is not JSON"),
        (["--max-attempts", "0"], None),
        (["--delay", "soon"], None),
        (["--priority", "101"], None),
    ],
    ids=["python-repr", "missing-file", "nan", "max-attempts", "delay", "priority"],
)
def test_a_bad_enqueue_is_one_line_and_stores_nothing(
    sqlite: StoreTarget, args: list[str], message: str | None
) -> None:
    result = _run("enqueue", "t", *args, "--url", sqlite.url, "--table-prefix", sqlite.namespace)
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    if message is not None:
        assert lines[0] == message
    assert _stored(sqlite) == []


def test_priority_is_stored_and_a_bad_one_is_a_usage_error(sqlite: StoreTarget) -> None:
    url = ["--url", sqlite.url, "--table-prefix", sqlite.namespace]
    done = _run("enqueue", "report.build", "--priority", "7", "--json", *url)
    assert done.exit_code == 0, done.output
    (job,) = _stored(sqlite)
    assert (job.id, job.priority) == (json.loads(done.stdout)["id"], 7)
    refused = _run("enqueue", "report.build", "--priority", "101", *url)
    assert refused.exit_code == 2
    assert "priority" in refused.output
    assert len(_stored(sqlite)) == 1


def test_queue_is_stored_listed_and_a_bad_one_is_a_usage_error(sqlite: StoreTarget) -> None:
    url = ["--url", sqlite.url, "--table-prefix", sqlite.namespace]
    done = _run("enqueue", "t", "--queue", "emails", "--json", *url)
    assert done.exit_code == 0, done.output
    assert _run("enqueue", "t", *url).exit_code == 0
    assert sorted(job.queue for job in _stored(sqlite)) == ["default", "emails"]
    listed = _run("jobs", "list", "--queue", "emails", "--json", *url)
    assert listed.exit_code == 0, listed.output
    assert [job["id"] for job in json.loads(listed.stdout)["jobs"]] == [
        json.loads(done.stdout)["id"]
    ]
    table = _run("jobs", "list", *url)
    assert "queue" in table.stdout
    assert "emails" in table.stdout
    bad = _run("enqueue", "t", "--queue", "two words", *url)
    assert bad.exit_code == 2, bad.output
    assert len(bad.stderr.strip().splitlines()) == 1
    assert "queue" in bad.stderr
    assert len(_stored(sqlite)) == 2
