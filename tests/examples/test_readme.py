"""Every ``<!-- readme-test: name -->`` code block of README.md runs, and prints what it says."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[2] / "README.md"
BLOCK = re.compile(r"<!-- readme-test: (?P<name>[\w-]+) -->\n```python\n(?P<code>.*?)```", re.S)
EXPECTED_OUTPUT = {
    "quickstart": "['a@b.c (attempt 1)']",
    "definitions": "does not fit Receipt",
    "driver": "state='pending'",
    "outbox": "emails for orders [1]",
    "shutdown": "",
    "schedules": "'pending': 1, 'active': 0",
    "dashboard": "200 True",
    "operations": "1 PermanentError: mailbox does not exist\nTrue\nTrue\n"
    "due=1 scheduled=0 cancelled=1\n1\n",
}


def blocks() -> dict[str, str]:
    return {m["name"]: m["code"] for m in BLOCK.finditer(README.read_text())}


def test_every_guide_section_is_tested() -> None:
    assert set(blocks()) == set(EXPECTED_OUTPUT)


@pytest.mark.parametrize("name", sorted(EXPECTED_OUTPUT))
def test_readme_block_runs(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    code = blocks()[name]
    exec(compile(code, f"README.md[{name}]", "exec"), {"__name__": f"readme_{name}"})
    assert EXPECTED_OUTPUT[name] in capsys.readouterr().out
