"""Every Python block of README.md and docs/ runs, and prints what the page says it prints.

A block is marked by the HTML comment on the line before its fence:

- ``<!-- docs-test: NAME -->``: a Python block run as a program; ``EXPECTED_OUTPUT[NAME]`` is in
  what it prints.
- ``<!-- docs-test-pytest: NAME -->``: a test module that passes under pytest in a directory of
  its own (the plugin comes from the installed package's entry point).
- ``<!-- docs-test-file: FILE -->``: a file of the page's scenario; ``<!-- docs-test-shell: NAME
  -->``: a shell block run, in page order, in a fresh directory holding the page's files, with
  the environment's ``bin`` first on the PATH; ``SHELL_OUTPUT[NAME]`` is in what it prints.
- ``<!-- not-tested: REASON -->``: a Python block that cannot run here, and why.

A Python block without a marker fails ``test_every_python_block_is_marked``; shell, text, SQL
and YAML blocks need none.
"""

from __future__ import annotations

import dataclasses
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
FENCE = re.compile(r"^```(?P<lang>[\w-]*)\n(?P<code>.*?)^```\s*$", re.S | re.M)
MARKER = re.compile(r"<!-- (?P<kind>docs-test|docs-test-pytest|docs-test-file|docs-test-shell|"
                    r"not-tested): (?P<arg>.+?) -->\s*$")  # fmt: skip

EXPECTED_OUTPUT = {
    "priorities": "['receipt.send', 'report.build']",
    "queues": "['alert', 'receipt'] 1",
    "fleet-limits": "at most 2 at once",
    "workflow-chain": "True {'zipped': ['page-1.pdf', 'page-2.pdf', 'page-3.pdf']}",
    "workflow-results": "result: {'pages': 3, 'url': 's3://reports/7.pdf'}",
    "readme-quickstart": "order 1 confirmed",
    "quickstart": "['a@b.c (attempt 1)']",
    "definitions": "does not fit Receipt",
    "typed-handler": "receipt 7 to a@b.c",
    "driver": "state='pending'",
    "outbox": "emails for orders [1]",
    "shutdown": "",
    "schedules": "'pending': 1, 'active': 0",
    "dashboard": "200 True",
    "dashboard-redact": "False True",
    "observability": 'jobs_executions_total{job_outcome="completed",job_type="email.send"',
    "batches": "[True, True, True, False]\npayload[\"at\"]: set is not JSON (use a list)\n"
    "True ['claim', 'heartbeat', 'presence'] 0\n",
    "operations": "1 PermanentError: mailbox does not exist\nTrue\nTrue\n"
    "due=1 scheduled=0 cancelled=1\n1\n",
    "testing": "Receipt(invoice_id=7)\npending 1\ncompleted 2\n[7]",
    "redis-topologies": "",
    "pgbouncer": "",
    "fastapi": "{'queued': True}\n{'queued': False}\n",
    "own-session": "None\n[{'invoice': 1}]\n",
    "own-async-session": "True 1\n",
    "effects-once": "completed [1, 2] [7]\n",
    "effects-once-sync": "completed [1, 2] [7]\n",
    "settings": "20 20000",
    "logging": "failed for good after attempt 1/1: ConnectionError: smtp down welcome:a@b.c\n",
    "di-primer": "ticker started\nhello, Ada\n['settings', 'greeter', 'ticker']\nticker stopped\n"
    "ticker closed\ngood morning, Ada\nticker closed\n",
}
PYTEST_BLOCKS = {"plugin": "1 passed", "driver-conformance": " passed"}
SHELL_OUTPUT = {
    "worker-burst": [
        "placed order 1\nplaced order 2\n",
        "order 1 (book) confirmed, attempt 1\n",
        "order 2 (lamp) confirmed, attempt 1\n",
    ],
    "worker-stats": ["order.placed │   0 │         0 │      0 │         2 │      0 │"],
    "sync-worker": [
        "queued pending\n",
        "sent to ada@example.com\n",
        "sent to grace@example.com\n",
        "email.send",
    ],
    "tracing-bean": [
        '"name": "POST /reports"',
        '"name": "jobs.enqueue report.build"',
        "building the report for 2026-11",
        '"name": "jobs.job.report.build"',
        '"kind": "SpanKind.CONSUMER"',
        '"service.name": "reports"',
    ],
    "tracing-instrument": ['"name": "jobs.job.report.build"', '"service.name": "reports-worker"'],
}
SAME_TRACE = {"tracing-bean"}
"""Shell blocks whose spans must all share one trace id (across the processes they start)."""

OWN_PROCESS = {"observability", "logging"}
"""Blocks that install a global OpenTelemetry provider (a process takes one only once) or
replace loguru's sinks; every block runs in a fresh directory of its own."""


@dataclasses.dataclass(frozen=True)
class Block:
    page: Path
    line: int
    lang: str
    kind: str | None
    arg: str | None
    code: str

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def page_blocks(page: Path) -> list[Block]:
    text = page.read_text()
    found = []
    for match in FENCE.finditer(text):
        before = text[: match.start()].rstrip("\n").rsplit("\n", 1)[-1]
        marker = MARKER.fullmatch(before.strip()) or MARKER.search(before)
        found.append(
            Block(
                page=page,
                line=text.count("\n", 0, match.start()) + 1,
                lang=match["lang"],
                kind=marker["kind"] if marker else None,
                arg=marker["arg"].strip() if marker else None,
                code=match["code"],
            )
        )
    return found


def all_blocks() -> list[Block]:
    return [block for page in PAGES for block in page_blocks(page)]


def named(kind: str) -> dict[str, Block]:
    blocks: dict[str, Block] = {}
    for block in all_blocks():
        if block.kind == kind:
            assert block.arg is not None
            assert block.arg not in blocks, f"{block.where}: {kind} {block.arg!r} used twice"
            blocks[block.arg] = block
    return blocks


# Scenarios of 10 s each (a worker and a tracing back end): `make test-all` runs them.
SLOW_SCENARIOS = {"how-to/observability.md", "tutorial/worker.md"}


def scenario_pages() -> list[Any]:
    pages = [p for p in PAGES if any(b.kind == "docs-test-shell" for b in page_blocks(p))]
    return [
        pytest.param(p, marks=pytest.mark.slow)
        if str(p.relative_to(ROOT / "docs")) in SLOW_SCENARIOS
        else p
        for p in pages
    ]


def clean_env() -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith("PYTEST_")}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    return env


def test_every_python_block_is_marked() -> None:
    unmarked = [b.where for b in all_blocks() if b.lang == "python" and b.kind is None]
    assert not unmarked, f"python blocks without a docs-test or not-tested marker: {unmarked}"


def test_markers_sit_on_blocks_of_their_kind() -> None:
    wrong = [
        b.where
        for b in all_blocks()
        if (b.kind in ("docs-test", "docs-test-pytest", "docs-test-file") and b.lang != "python")
        or (b.kind == "docs-test-shell" and b.lang != "sh")
    ]
    assert not wrong, f"markers on blocks of another language: {wrong}"


def test_every_block_has_its_expectation() -> None:
    assert set(named("docs-test")) == set(EXPECTED_OUTPUT)
    assert set(named("docs-test-pytest")) == set(PYTEST_BLOCKS)
    assert set(named("docs-test-shell")) == set(SHELL_OUTPUT)


@pytest.mark.parametrize("name", sorted(EXPECTED_OUTPUT))
def test_block_runs(
    name: str, capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    block = named("docs-test")[name]
    if name in OWN_PROCESS:
        result = subprocess.run(
            [sys.executable, "-c", block.code], cwd=tmp_path, env=clean_env(),
            capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
        assert result.returncode == 0, result.stderr[-3000:]
        assert EXPECTED_OUTPUT[name] in result.stdout
        return
    monkeypatch.chdir(tmp_path)
    exec(compile(block.code, block.where, "exec"), {"__name__": f"docs_{name}"})
    assert EXPECTED_OUTPUT[name] in capsys.readouterr().out


@pytest.mark.parametrize("name", sorted(PYTEST_BLOCKS))
def test_pytest_block_passes(name: str, tmp_path: Path) -> None:
    (tmp_path / f"test_docs_{name}.py").write_text(named("docs-test-pytest")[name].code)
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-o", "asyncio_mode=auto"],
        cwd=tmp_path, env=clean_env(), capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    assert PYTEST_BLOCKS[name] in result.stdout


@pytest.mark.parametrize(
    "page", scenario_pages(), ids=lambda page: str(page.relative_to(ROOT / "docs"))
)
def test_page_scenario_runs(page: Path, tmp_path: Path) -> None:
    """The page's files, then its shell blocks in order, as a reader would type them."""
    blocks = page_blocks(page)
    for block in blocks:
        if block.kind == "docs-test-file":
            assert block.arg is not None
            (tmp_path / block.arg).write_text(block.code)
    for block in blocks:
        if block.kind != "docs-test-shell":
            continue
        assert block.arg is not None
        result = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", block.code], cwd=tmp_path, env=clean_env(),
            capture_output=True, text=True, timeout=180, check=False,
        )  # fmt: skip
        output = result.stdout[-3000:] + result.stderr[-3000:]
        assert result.returncode == 0, f"{block.where}\n{output}"
        for expected in SHELL_OUTPUT[block.arg]:
            assert expected in result.stdout, f"{block.where}: {expected!r} not in\n{result.stdout}"
        if block.arg in SAME_TRACE:
            trace_ids = set(re.findall(r'"trace_id": "(0x[0-9a-f]+)"', result.stdout))
            assert len(trace_ids) == 1, trace_ids


def test_the_settings_page_names_every_setting() -> None:
    from jobs import JobsSettings

    page = (ROOT / "docs/reference/settings.md").read_text()
    missing = [f.name for f in dataclasses.fields(JobsSettings) if f"| `{f.name}` |" not in page]
    assert not missing, f"docs/reference/settings.md has no row for {missing}"


def test_the_errors_page_names_every_exported_error() -> None:
    import framework
    import jobs
    import orm_sqlalchemy
    import redis_jobs

    page = (ROOT / "docs/reference/errors.md").read_text()
    missing = [
        f"{package.__name__}.{name}"
        for package in (framework, jobs, orm_sqlalchemy, redis_jobs)
        for name in package.__all__
        if isinstance(getattr(package, name), type)
        and issubclass(getattr(package, name), Exception)
        and not re.search(rf"\b{name}\b", page)
    ]
    assert not missing, f"docs/reference/errors.md does not name {missing}"


def test_the_metrics_page_names_every_instrument() -> None:
    source = (ROOT / "jobs/metrics.py").read_text()
    instruments = re.findall(r'create_\w+\(\s*"([\w.]+)"', source)
    assert len(instruments) >= 8
    page = (ROOT / "docs/reference/metrics.md").read_text()
    missing = [name for name in instruments if f"`{name}`" not in page]
    assert not missing, f"docs/reference/metrics.md does not name {missing}"


def test_the_readme_links_into_the_docs_resolve() -> None:
    """mkdocs checks the site's links; the README (read on the repository's page) is not in it."""
    readme = (ROOT / "README.md").read_text()
    targets = re.findall(r"\]\(((?:docs|examples)/[^)#]+)", readme)
    assert targets
    missing = [target for target in targets if not (ROOT / target).exists()]
    assert not missing, f"README.md links to missing files: {missing}"
