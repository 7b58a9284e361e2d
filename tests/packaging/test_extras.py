"""A missing extra fails at use with one line naming it (``MissingExtraError``).

Each case runs in a subprocess whose ``sys.modules[name] = None`` stands for the package not
being installed (``import name`` then fails as for a missing module); the wheel test
(``test_wheel.py``) sees the same lines from a real install without extras.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.packaging

REPO = Path(__file__).resolve().parents[2]
REDIS = "RedisJobDriver needs the redis extra: pip install 'neverlost[redis]'"
POSTGRES = "PostgreSQL needs the postgres extra: pip install 'neverlost[postgres]'"


def run_without(
    missing: tuple[str, ...], code: str, tmp_path: Path
) -> subprocess.CompletedProcess[str]:
    """Run ``code`` in a fresh interpreter where the ``missing`` modules cannot be imported."""
    hide = "".join(f"sys.modules[{name!r}] = None\n" for name in missing)
    script = "import sys\n" + hide + textwrap.dedent(code)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run(
        [sys.executable, "-c", script],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def import_error(missing: tuple[str, ...], statement: str, tmp_path: Path) -> str:
    """The ImportError ``statement`` raises without ``missing``, as ``Type|extra|message``."""
    result = run_without(
        missing,
        f"""
        try:
            {statement}
        except ImportError as exc:
            print(f"{{type(exc).__name__}}|{{getattr(exc, 'extra', None)}}|{{exc}}")
        else:
            print("no error")
        """,
        tmp_path,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


def cli_without(
    missing: tuple[str, ...], args: list[str], tmp_path: Path
) -> subprocess.CompletedProcess[str]:
    return run_without(
        missing, f"from jobs.cli import main\nsys.argv = ['neverlost', *{args!r}]\nmain()", tmp_path
    )


@pytest.mark.parametrize("module", ["redis", "hiredis"])
def test_redis_jobs_without_the_redis_extra_names_it(module: str, tmp_path: Path) -> None:
    line = import_error((module,), "from redis_jobs import RedisJobDriver", tmp_path)
    assert line == f"MissingExtraError|redis|{REDIS}"


def test_a_postgresql_engine_without_the_postgres_extra_names_it(tmp_path: Path) -> None:
    statement = "from orm_sqlalchemy import create_engine; create_engine('postgresql://db/app')"
    line = import_error(("asyncpg",), statement, tmp_path)
    assert line == f"MissingExtraError|postgres|{POSTGRES}"


def test_sqlite_needs_no_postgres_extra(tmp_path: Path) -> None:
    """The SQL stores import without asyncpg and run on SQLite."""
    result = run_without(
        ("asyncpg",),
        f"""
        import asyncio
        from jobs import JobQueue
        from orm_sqlalchemy import SQLAlchemyJobStore

        async def main():
            store = SQLAlchemyJobStore("sqlite+aiosqlite:///{tmp_path / "jobs.db"}")
            try:
                job_id = await JobQueue(store).enqueue("email.send", {{"to": "a@b.c"}})
                print((await store.get_job(job_id)).state)
            finally:
                await store.close()

        asyncio.run(main())
        """,
        tmp_path,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "pending"


@pytest.mark.parametrize("module", ["starlette", "jinja2", "uvicorn"])
def test_the_dashboard_without_its_extra_names_it(module: str, tmp_path: Path) -> None:
    line = import_error((module,), "from jobs.web import create_dashboard", tmp_path)
    expected = (
        "The dashboard (jobs.web) needs the dashboard extra: pip install 'neverlost[dashboard]'"
    )
    assert line == f"MissingExtraError|dashboard|{expected}"


def test_neverlost_dashboard_without_its_extra_is_listed_and_fails_in_one_line(
    tmp_path: Path,
) -> None:
    listing = cli_without(("starlette",), ["--help"], tmp_path)
    assert listing.returncode == 0, listing.stderr
    assert "dashboard    (needs the dashboard extra)" in listing.stdout
    result = cli_without(("starlette",), ["dashboard", "--url", "sqlite:///jobs.db"], tmp_path)
    assert result.returncode == 1
    assert result.stderr.splitlines() == [
        "Error: neverlost dashboard needs the dashboard extra: pip install 'neverlost[dashboard]'"
    ]


def test_worker_health_port_without_the_dashboard_extra_fails_in_one_line(tmp_path: Path) -> None:
    result = cli_without(
        ("uvicorn",), ["worker", "tests.cli.app:CliTestApp", "--health-port", "0"], tmp_path
    )
    assert result.returncode == 1
    assert result.stderr.splitlines() == [
        "Error: neverlost worker --health-port needs the dashboard extra: "
        "pip install 'neverlost[dashboard]'"
    ]


@pytest.mark.parametrize(
    ("missing", "url", "line"),
    [
        ("redis", "redis://127.0.0.1:1", REDIS),
        ("asyncpg", "postgresql://127.0.0.1:1/app", POSTGRES),
    ],
)
def test_a_store_url_without_its_extra_fails_in_one_line(
    missing: str, url: str, line: str, tmp_path: Path
) -> None:
    result = cli_without((missing,), ["stats", "--url", url], tmp_path)
    assert result.returncode == 1
    assert result.stderr.splitlines() == [f"Error: {line}"]


def test_the_cli_runs_on_sqlite_without_any_extra(tmp_path: Path) -> None:
    missing = ("redis", "hiredis", "asyncpg", "starlette", "jinja2", "uvicorn", "multipart")
    url = f"sqlite:///{tmp_path / 'jobs.db'}"
    result = run_without(
        missing,
        f"""
        import asyncio
        from jobs import JobQueue
        from jobs.cli import main
        from orm_sqlalchemy import SQLAlchemyJobStore

        async def enqueue():
            store = SQLAlchemyJobStore({url!r})
            try:
                await JobQueue(store).enqueue("email.send", {{"to": "a@b.c"}})
            finally:
                await store.close()

        asyncio.run(enqueue())
        sys.argv = ["neverlost", "stats", "--url", {url!r}]
        main()
        """,
        tmp_path,
    )
    assert result.returncode == 0, result.stderr
    assert "email.send" in result.stdout


def test_the_pytest_plugin_loads_without_pytest_asyncio(tmp_path: Path) -> None:
    """An application whose tests do not use the async fixtures needs no pytest-asyncio; one
    that asks for ``jobs_context`` is told what to install."""
    (tmp_path / "test_app.py").write_text(
        "def test_plain():\n    pass\n\n\ndef test_context(jobs_context):\n    pass\n"
    )
    blocker = """
        import importlib.abc

        class NotInstalled(importlib.abc.MetaPathFinder):
            def find_spec(self, name, path=None, target=None):
                if name.partition(".")[0] == "pytest_asyncio":
                    raise ModuleNotFoundError(f"No module named {name!r}", name=name)
                return None

        sys.meta_path.insert(0, NotInstalled())
        import pytest
        # no:asyncio and plain asserts: the plugin and pytest's import hook, which would load
        # pytest_asyncio past this finder
        args = ["-p", "no:asyncio", "--assert=plain", "-p", "no:cacheprovider", "-q", "-rE"]
        sys.exit(pytest.main([*args, "test_app.py"]))
        """
    result = run_without((), blocker, tmp_path)
    assert "1 passed, 1 error" in result.stdout, result.stdout + result.stderr
    assert "jobs_context is async: it needs pytest-asyncio (pip install pytest-asyncio)" in (
        result.stdout
    )
