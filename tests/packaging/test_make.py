"""``make install`` on a fresh copy of the checkout: exactly uv.lock, no warning, a stamp that
re-syncs only when uv.lock or pyproject.toml change, and a refusal when they disagree.

The copy shares the checkout's bootstrapped uv (``.tools``) and uv's cache, so the install is
the same ``uv sync --locked`` a fresh clone runs, in a second or two.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest

pytestmark = pytest.mark.packaging

REPO = Path(__file__).resolve().parents[2]
INSTALL_INPUTS = ("pyproject.toml", "uv.lock", "Makefile", "README.md", "LICENSE", "CHANGELOG.md")
PACKAGES = ("framework", "jobs", "orm_sqlalchemy", "redis_jobs")


def make(checkout: Path, *targets: str) -> subprocess.CompletedProcess[str]:
    outer = ("MAKEFLAGS", "MAKELEVEL", "MFLAGS", "VIRTUAL_ENV", "PYTHONPATH")
    env = {key: value for key, value in os.environ.items() if key not in outer}
    return subprocess.run(
        ["make", *targets], cwd=checkout, env=env, capture_output=True, text=True, timeout=300
    )


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    copy = tmp_path / "neverlost"
    copy.mkdir()
    for name in INSTALL_INPUTS:
        shutil.copy2(REPO / name, copy / name)
    for package in PACKAGES:
        shutil.copytree(
            REPO / package, copy / package, ignore=shutil.ignore_patterns("__pycache__")
        )
    if (REPO / ".tools").is_dir():
        (copy / ".tools").symlink_to(REPO / ".tools")
    return copy


def test_make_install_installs_the_lock_without_a_warning(checkout: Path) -> None:
    result = make(checkout, "install")
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert "warning" not in output.lower()
    assert "deprecat" not in output.lower()

    lock = tomllib.loads((checkout / "uv.lock").read_text())
    locked = {package["name"]: package["version"] for package in lock["package"]}
    versions = subprocess.run(
        [
            str(checkout / ".venv/bin/python"),
            "-c",
            "import importlib.metadata as m\n"
            "for name in ('redis', 'sqlalchemy', 'pydantic', 'neverlost'):\n"
            "    print(name, m.version(name))",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split("\n")
    for line in filter(None, versions):
        name, version = line.split()
        assert locked[name] == version


def test_the_install_stamp_resyncs_only_after_the_lock_or_pyproject_changes(
    checkout: Path,
) -> None:
    assert make(checkout, "install").returncode == 0
    stamp = checkout / ".venv/.installed"
    first = stamp.stat().st_mtime_ns

    again = make(checkout, "install")
    assert again.returncode == 0
    assert "uv" not in again.stdout + again.stderr
    assert stamp.stat().st_mtime_ns == first

    for changed in ("uv.lock", "pyproject.toml"):
        before = stamp.stat().st_mtime_ns
        os.utime(checkout / changed, ns=(before + 10**9, before + 10**9))
        resync = make(checkout, "install")
        assert resync.returncode == 0, resync.stderr
        assert stamp.stat().st_mtime_ns > before, changed


def test_a_pyproject_that_the_lock_does_not_match_fails_the_install(checkout: Path) -> None:
    pyproject = checkout / "pyproject.toml"
    text = pyproject.read_text()
    pyproject.write_text(text.replace('"cronsim>=2.6",', '"cronsim>=2.6",\n    "six>=1.16",', 1))
    assert pyproject.read_text() != text

    result = make(checkout, "install")
    assert result.returncode != 0
    assert "run 'make lock' and commit uv.lock" in result.stderr
    assert not (checkout / ".venv/.installed").exists()
