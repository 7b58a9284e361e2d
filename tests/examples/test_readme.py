"""Every ``<!-- readme-test: name -->`` code block of README.md runs, and prints what it says;
every ``<!-- readme-test-pytest: name -->`` block is a test module that passes under pytest in a
directory of its own (the plugin comes from the installed package's entry point)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[2] / "README.md"
BLOCK = re.compile(r"<!-- readme-test: (?P<name>[\w-]+) -->\n```python\n(?P<code>.*?)```", re.S)
PYTEST_BLOCK = re.compile(
    r"<!-- readme-test-pytest: (?P<name>[\w-]+) -->\n```python\n(?P<code>.*?)```", re.S
)
EXPECTED_OUTPUT = {
    "quickstart": "['a@b.c (attempt 1)']",
    "definitions": "does not fit Receipt",
    "driver": "state='pending'",
    "outbox": "emails for orders [1]",
    "shutdown": "",
    "schedules": "'pending': 1, 'active': 0",
    "dashboard": "200 True",
    "observability": 'jobs_executions_total{job_outcome="completed",job_type="email.send"',
    "batches": "[True, True, True, False]\npayload[\"at\"]: set is not JSON (use a list)\n"
    "True ['claim', 'heartbeat', 'presence'] 0\n",
    "operations": "1 PermanentError: mailbox does not exist\nTrue\nTrue\n"
    "due=1 scheduled=0 cancelled=1\n1\n",
    "testing": "Receipt(invoice_id=7)\npending 1\ncompleted 2 09:00:01\n[7]",
}
PYTEST_BLOCKS = {"plugin": "1 passed"}


OWN_PROCESS = {"observability"}
"""Blocks that install a global OpenTelemetry provider, which a process takes only once."""


def blocks() -> dict[str, str]:
    return {m["name"]: m["code"] for m in BLOCK.finditer(README.read_text())}


def test_every_guide_section_is_tested() -> None:
    assert set(blocks()) == set(EXPECTED_OUTPUT)


@pytest.mark.parametrize("name", sorted(EXPECTED_OUTPUT))
def test_readme_block_runs(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    code = blocks()[name]
    if name in OWN_PROCESS:
        result = subprocess.run(
            [sys.executable, "-c", code], cwd=README.parent, capture_output=True, text=True,
            timeout=120, check=False,
        )  # fmt: skip
        assert result.returncode == 0, result.stderr[-3000:]
        assert EXPECTED_OUTPUT[name] in result.stdout
        return
    exec(compile(code, f"README.md[{name}]", "exec"), {"__name__": f"readme_{name}"})
    assert EXPECTED_OUTPUT[name] in capsys.readouterr().out


def test_every_pytest_block_is_tested() -> None:
    assert {m["name"] for m in PYTEST_BLOCK.finditer(README.read_text())} == set(PYTEST_BLOCKS)


@pytest.mark.parametrize("name", sorted(PYTEST_BLOCKS))
def test_readme_pytest_block_passes(name: str, tmp_path: Path) -> None:
    code = {m["name"]: m["code"] for m in PYTEST_BLOCK.finditer(README.read_text())}[name]
    (tmp_path / f"test_readme_{name}.py").write_text(code)
    env = {key: value for key, value in os.environ.items() if not key.startswith("PYTEST_")}
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-o", "asyncio_mode=auto"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert PYTEST_BLOCKS[name] in result.stdout
