"""Bad APP, URL or arguments: one line naming what is wrong, exit 2, no traceback, no write."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from jobs.cli import cli
from tests.stores import StoreTarget


def invoke(*args: str, env: dict[str, str] | None = None) -> Result:
    return CliRunner().invoke(cli, list(args), env=env, catch_exceptions=False)


def assert_one_line_error(result: Result, *fragments: str) -> None:
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("Error: ")
    assert "Traceback" not in result.output
    for fragment in fragments:
        assert fragment in lines[0]


@pytest.fixture
def broken_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    (tmp_path / "cli_broken_app.py").write_text(
        textwrap.dedent("""
            import json
            raise RuntimeError("the settings file is missing")
        """)
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    yield "cli_broken_app"
    sys.modules.pop("cli_broken_app", None)


@pytest.mark.parametrize(
    ("app", "fragments"),
    [
        ("tests.cli.app", ["is not of the form module:attr"]),
        ("no_such_module_here:App", ["no module named 'no_such_module_here'"]),
        ("tests.cli.app:Missing", ["'tests.cli.app' has no attribute 'Missing'"]),
        ("tests.cli.app:NOT_A_CONFIGURATION", ["is a int, not a @configuration class"]),
        ("tests.cli.app:CliHandlers", ["CliHandlers (not decorated with @configuration)"]),
    ],
)
def test_a_bad_app_is_one_line_and_exit_2(app: str, fragments: list[str]) -> None:
    assert_one_line_error(invoke("worker", app), repr(app), *fragments)
    assert_one_line_error(invoke("stats", app), repr(app), *fragments)


def test_an_app_whose_module_fails_to_import_names_the_cause(broken_module: str) -> None:
    result = invoke("worker", f"{broken_module}:App")
    assert_one_line_error(result, "failed to import", "RuntimeError: the settings file is missing")


@pytest.mark.parametrize(
    ("url", "fragments"),
    [
        ("mysql://root:hunter2@db/jobs", ["unknown", "'mysql'", "sqlite+aiosqlite://", "redis://"]),
        ("jobs.db", ["no scheme", "postgresql://"]),
    ],
)
def test_an_unknown_url_scheme_names_the_accepted_ones(url: str, fragments: list[str]) -> None:
    result = invoke("stats", "--url", url)
    assert_one_line_error(result, *fragments)
    assert "hunter2" not in result.output  # the password is not echoed


def test_app_or_url_exactly_one(tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'jobs.db'}"
    assert_one_line_error(invoke("stats"), "give APP (module:attr) or --url")
    assert_one_line_error(invoke("stats", "tests.cli.app:CliTestApp", "--url", url), "not both")
    assert_one_line_error(
        invoke("stats", "--url", url, "--namespace", "x"), "--namespace is for redis://"
    )
    assert not (tmp_path / "jobs.db").exists()  # refused before anything was opened


def test_bad_arguments_are_one_line_with_the_usage_hint() -> None:
    assert_one_line_error(invoke("worker", "--no-such-flag"), "--no-such-flag", "--help")
    assert_one_line_error(invoke("worker", "x:y", "--concurrency", "0"), "--concurrency")
    assert_one_line_error(
        invoke("purge", "--url", "redis://127.0.0.1:1/0", "--state", "active"), "'active'"
    )
    assert_one_line_error(
        invoke(
            "purge", "--url", "redis://127.0.0.1:1/0", "--state", "failed", "--older-than", "soon"
        ),
        "7d, 12h",
    )
    assert_one_line_error(invoke("retry", "--url", "redis://127.0.0.1:1/0"), "job IDs or --failed")
    assert_one_line_error(invoke("cancel", "a.app:One", "b.app:Two", "ID1"), "one APP at most")
    assert_one_line_error(invoke("jobs", "show", "--url", "redis://127.0.0.1:1/0"), "one job ID")


def test_unknown_types_for_the_worker_are_named_with_the_handled_ones(tmp_path: Path) -> None:
    target = StoreTarget.fresh("sqlite", tmp_path)
    env = {"CLI_TEST_TARGET": target.to_json()}
    result = invoke("worker", "tests.cli.app:CliTestApp", "--types", "cli.sleep,cli.nope", env=env)
    assert_one_line_error(result, "cli.nope", "the handled types are cli.block, cli.fail")


def test_python_dash_m_jobs_is_the_same_command_line() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "jobs", "--help"], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("Usage: neverlost [OPTIONS] COMMAND [ARGS]...")
    for command in ("worker", "stats", "workers", "schedules", "jobs", "retry", "cancel", "purge"):
        assert f"  {command} " in result.stdout
    assert "healthcheck" in result.stdout


def test_every_subcommand_has_help() -> None:
    for command in (
        ["worker"],
        ["stats"],
        ["jobs", "list"],
        ["jobs", "show"],
        ["retry"],
        ["purge"],
    ):
        result = invoke(*command, "--help")
        assert result.exit_code == 0, result.output
        assert "Usage: neverlost" in result.stdout
        assert "--json" in result.stdout or command == ["worker"]


def test_an_app_whose_beans_cannot_be_made_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CLI_TEST_TARGET", raising=False)
    result = invoke("stats", "tests.cli.app:CliTestApp")
    assert_one_line_error(result, "'tests.cli.app:CliTestApp'", "job_driver", "CLI_TEST_TARGET")
    assert_one_line_error(invoke("worker", "tests.cli.app:CliTestApp"), "job_driver")
