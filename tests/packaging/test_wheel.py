"""The package as a user gets it: ``uv build`` makes the wheel and the sdist, the wheel goes into
a fresh venv outside the checkout, and the quickstart, an app on SQLite (outbox and a
``neverlost worker --burst``) and the command line run from there.

uv is the one make bootstraps (``.tools/bin/uv``, or ``$NEVERLOST_UV``, or uv on PATH); the
installs come from uv's cache, which ``make install`` filled.
"""

from __future__ import annotations

import email
import os
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

pytestmark = pytest.mark.packaging

REPO = Path(__file__).resolve().parents[2]
PACKAGES = ("framework", "jobs", "orm_sqlalchemy", "redis_jobs")
VERSION = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
EXTRAS = {"redis", "postgres", "dashboard", "prometheus", "all"}


def _uv() -> str:
    found = os.environ.get("NEVERLOST_UV") or (
        str(REPO / ".tools/bin/uv") if (REPO / ".tools/bin/uv").exists() else shutil.which("uv")
    )
    if found is None:
        pytest.fail("the packaging tests need uv: run `make install` (it bootstraps .tools/bin/uv)")
    return found


def _clean_env(**extra: str) -> dict[str, str]:
    """The environment without anything that points into the checkout or its venv."""
    dropped = ("PYTHONPATH", "VIRTUAL_ENV", "UV_PROJECT_ENVIRONMENT", "PYTHONHOME")
    env = {key: value for key, value in os.environ.items() if key not in dropped}
    bin_dir = str(Path(sys.executable).parent)
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if p != bin_dir)
    return {**env, **extra}


def run(args: list[str], cwd: Path, **extra_env: str) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        args, cwd=cwd, env=_clean_env(**extra_env), capture_output=True, text=True, timeout=240
    )
    assert result.returncode == 0, f"{args} exited {result.returncode}:\n{result.stderr}"
    return result


class Built:
    def __init__(self, dist: Path) -> None:
        (self.wheel,) = dist.glob("neverlost-*.whl")
        (self.sdist,) = dist.glob("neverlost-*.tar.gz")
        with zipfile.ZipFile(self.wheel) as archive:
            self.files = set(archive.namelist())
            info = f"neverlost-{VERSION}.dist-info"
            self.metadata = email.message_from_bytes(archive.read(f"{info}/METADATA"))
            self.entry_points = archive.read(f"{info}/entry_points.txt").decode()


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Built:
    dist = tmp_path_factory.mktemp("dist")
    run([_uv(), "build", "--quiet", "--out-dir", str(dist), str(REPO)], cwd=dist)
    return Built(dist)


@pytest.fixture(scope="module")
def venv(built: Built, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv outside the checkout with the wheel installed, no extras."""
    root = tmp_path_factory.mktemp("user")
    run([_uv(), "venv", "--quiet", "--python", sys.executable, str(root / "venv")], cwd=root)
    python = str(root / "venv/bin/python")
    run([_uv(), "pip", "install", "--quiet", "--python", python, str(built.wheel)], cwd=root)
    return root / "venv"


def test_the_wheel_carries_every_package_file_and_the_metadata(built: Built) -> None:
    for package in PACKAGES:
        assert f"{package}/py.typed" in built.files
        for path in (REPO / package).rglob("*"):
            if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc":
                assert path.relative_to(REPO).as_posix() in built.files
    assert any(name.endswith(".lua") for name in built.files)
    assert any(name.endswith(".sql") for name in built.files)
    assert "jobs/web/templates/base.html" in built.files
    assert "jobs/web/static/dashboard.css" in built.files
    assert not [name for name in built.files if name.startswith(("tests/", "examples/"))]
    assert f"neverlost-{VERSION}.dist-info/licenses/LICENSE" in built.files

    assert built.metadata["Version"] == VERSION
    assert built.metadata["License-Expression"] == "MIT"
    assert set(built.metadata.get_all("Provides-Extra") or []) == EXTRAS
    assert "[pytest11]\nneverlost = jobs.pytest_plugin" in built.entry_points
    assert "[console_scripts]\nneverlost = jobs.cli:main" in built.entry_points


def test_the_sdist_builds_the_wheel_and_holds_the_sources_and_tests(built: Built) -> None:
    """``uv build`` makes the wheel from the sdist, so the wheel above proves it complete."""
    import tarfile

    with tarfile.open(built.sdist) as archive:
        names = {name.partition("/")[2] for name in archive.getnames()}
    for name in ("pyproject.toml", "LICENSE", "CHANGELOG.md", "README.md", "uv.lock"):
        assert name in names
    assert "tests/packaging/test_wheel.py" in names
    assert "jobs/py.typed" in names
    assert not [name for name in names if name.startswith((".venv", ".tools"))]


def test_the_installed_packages_come_from_the_venv_not_the_checkout(venv: Path) -> None:
    code = "import framework, jobs, orm_sqlalchemy; print(jobs.__version__)\n" + "".join(
        f"print({name}.__file__)\n" for name in ("framework", "jobs", "orm_sqlalchemy")
    )
    out = run([str(venv / "bin/python"), "-c", code], cwd=venv.parent).stdout.splitlines()
    assert out[0] == VERSION
    for path in out[1:]:
        assert Path(path).resolve().is_relative_to(venv.resolve())
        assert not Path(path).resolve().is_relative_to(REPO)


def test_the_quickstart_runs_from_the_installed_wheel(venv: Path) -> None:
    shutil.copy(REPO / "examples/quickstart.py", venv.parent / "quickstart.py")
    out = run([str(venv / "bin/python"), "quickstart.py"], cwd=venv.parent).stdout
    assert "sent to user2@example.com (attempt 2)" in out
    assert "'completed': 3" in out


SQLITE_APP = '''
"""A user's app on SQLite: orders' emails through the outbox, sent by `neverlost worker`."""
import asyncio
from pathlib import Path

from sqlalchemy.ext.asyncio import AsyncEngine

from framework import ApplicationBuilder, configuration, entry
from jobs import JOB_DRIVER, OUTBOX_STORE, JobDriver, JobsAutoConfiguration, OutboxStore
from jobs import job_handler
from orm_sqlalchemy import (
    SQLAlchemyJobStore, SQLAlchemyOutboxStore, SQLAlchemyTransactionManager, create_engine,
)

HERE = Path(__file__).parent


class Mailer:
    @job_handler("email.send")
    async def send(self, payload: dict) -> None:
        with (HERE / "sent.txt").open("a") as sent:
            sent.write(payload["to"] + "\\n")


@configuration
class App:
    @entry()
    def engine(self) -> AsyncEngine:
        return create_engine(f"sqlite+aiosqlite:///{HERE / 'app.db'}")

    @entry()
    def transaction_manager(self, engine: AsyncEngine) -> SQLAlchemyTransactionManager:
        return SQLAlchemyTransactionManager(engine)

    @entry(OUTBOX_STORE)
    def outbox_store(self, transaction_manager: SQLAlchemyTransactionManager) -> OutboxStore:
        return SQLAlchemyOutboxStore(transaction_manager=transaction_manager)

    @entry(JOB_DRIVER)
    def job_driver(self, engine: AsyncEngine) -> JobDriver:
        return SQLAlchemyJobStore(engine=engine)

    @entry()
    def mailer(self) -> Mailer:
        return Mailer()


async def place_orders() -> None:
    async with await ApplicationBuilder([JobsAutoConfiguration, App]).run() as context:
        transactions = context.get_value("transaction_manager")
        outbox = context.get_value(OUTBOX_STORE)
        for n in range(3):
            async with transactions.transaction():
                await outbox.append("email.send", {"to": f"user{n}@example.com"})


if __name__ == "__main__":
    asyncio.run(place_orders())
'''


def test_an_app_on_sqlite_and_its_worker_run_from_the_installed_wheel(venv: Path) -> None:
    home = venv.parent / "sqlite-app"
    home.mkdir()
    (home / "sqlite_app.py").write_text(SQLITE_APP)
    run([str(venv / "bin/python"), "sqlite_app.py"], cwd=home)
    assert not (home / "sent.txt").exists()  # appended in the transactions, nothing run yet
    worker = run([str(venv / "bin/neverlost"), "worker", "sqlite_app:App", "--burst"], cwd=home)
    assert "worker ready" in worker.stderr  # the worker shows the library's log lines
    sent = sorted((home / "sent.txt").read_text().split())
    assert sent == ["user0@example.com", "user1@example.com", "user2@example.com"]


def test_the_command_line_of_the_installed_wheel(venv: Path) -> None:
    neverlost = str(venv / "bin/neverlost")
    assert run([neverlost, "--version"], cwd=venv.parent).stdout == f"neverlost {VERSION}\n"
    usage = run([neverlost, "--help"], cwd=venv.parent).stdout
    assert "worker" in usage
    assert "(needs the dashboard extra)" in usage
    dashboard = subprocess.run(
        [neverlost, "dashboard", "--url", "sqlite:///app.db"],
        cwd=venv.parent,
        env=_clean_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert dashboard.returncode == 1
    assert dashboard.stderr.splitlines() == [
        "Error: neverlost dashboard needs the dashboard extra: pip install 'neverlost[dashboard]'"
    ]


def test_without_extras_redis_says_which_extra_and_the_extras_install_it(
    venv: Path, built: Built
) -> None:
    python = str(venv / "bin/python")
    check = (
        "try:\n    import redis_jobs\nexcept ImportError as exc:\n    print(exc)\n"
        "else:\n    print('imported')\n"
    )
    before = run([python, "-c", check], cwd=venv.parent).stdout
    assert before == "RedisJobDriver needs the redis extra: pip install 'neverlost[redis]'\n"

    run(
        [_uv(), "pip", "install", "--quiet", "--python", python, f"{built.wheel}[all]"],
        cwd=venv.parent,
    )
    assert run([python, "-c", check], cwd=venv.parent).stdout == "imported\n"
    importable = "import asyncpg, hiredis, jobs.web, opentelemetry.exporter.prometheus, uvicorn"
    run([python, "-c", importable], cwd=venv.parent)
