"""The public API types as an application sees it: ``mypy --strict`` against the installed package.

mypy runs in a directory outside the checkout, with no MYPYPATH, so the packages are found only
through the editable install (``make install`` uses a static path, which mypy can follow; an
import-hook editable install would leave every import unresolved). ``typed_app.py`` must pass;
each line of ``rejected.py`` marked ``# rejected`` must be refused, and nothing else.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).parent


def test_a_typed_app_passes_and_misuses_are_refused_by_mypy_strict(
    tmp_path: Path, pytestconfig: pytest.Config
) -> None:
    cache = pytestconfig.cache.mkdir("mypy-typing") if pytestconfig.cache else tmp_path / "cache"
    for name in ("typed_app.py", "rejected.py"):
        shutil.copy(HERE / name, tmp_path / name)
    env = {key: value for key, value in os.environ.items() if key not in ("MYPYPATH", "PYTHONPATH")}
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--strict",
            "--no-error-summary",
            "--show-error-codes",
            "--cache-dir",
            str(cache),
            "typed_app.py",
            "rejected.py",
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    errors = [line for line in result.stdout.splitlines() if ": error:" in line]
    assert not [line for line in errors if not line.startswith("rejected.py:")], result.stdout
    refused = {
        int(match.group(1))
        for line in errors
        if (match := re.match(r"rejected.py:(\d+):", line)) is not None
    }
    source = (HERE / "rejected.py").read_text().splitlines()
    expected = {number for number, line in enumerate(source, 1) if line.endswith("# rejected")}
    assert len(expected) == 9
    assert refused == expected, result.stdout
    assert result.returncode == 1
