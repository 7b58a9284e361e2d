"""The library's log lines are off by default and on with ``jobs.enable_logging()``, carrying
the job (``job_key`` too) and the current span's ``trace_id``/``span_id``.

Each case is a fresh interpreter (the test session itself enables the lines in conftest.py).
A line "from" a package is written with that package's module name as loguru sees it, plus a
real one: the runner's retry warning, from ``jobs.telemetry``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[3]
PACKAGES = ("framework", "jobs", "orm_sqlalchemy", "redis_jobs")

APP = '''
import asyncio
import json
import sys

from loguru import logger
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import jobs
from jobs import (
    InProcessJobDriver,
    JobContext,
    JobHandlerRegistry,
    JobQueue,
    JobRunner,
    JobsSettings,
)

MODE = sys.argv[1]


def as_library(package: str) -> None:
    """A warning written as the package's own module would write it."""
    module = {"__name__": f"{package}.module", "logger": logger, "package": package}
    exec("logger.warning('a line of ' + package)", module)


async def run_a_job() -> None:
    driver = InProcessJobDriver()
    registry = JobHandlerRegistry()

    async def flaky(payload: dict, ctx: JobContext) -> None:
        logger.info("the handler of attempt {}", ctx.attempt)
        if ctx.attempt == 1:
            raise ConnectionError("mail server busy")

    registry.register("email.send", flaky)
    runner = JobRunner(driver, registry, JobsSettings(concurrency=1))
    job_id = await JobQueue(driver).enqueue("email.send", {}, key="order:7")
    runner.start()
    while (await driver.get_job(job_id)).state != "completed":
        await asyncio.sleep(0.01)
    await runner.close()


if MODE == "default":  # loguru's own stderr sink, as an application has it
    import framework, orm_sqlalchemy, redis_jobs  # noqa: F401
else:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    logger.remove()
    def sink(message):
        record = message.record
        fields = {"name": record["name"], "message": record["message"], "extra": record["extra"]}
        print(json.dumps(fields))

    logger.add(sink, level="DEBUG")
    logger.configure(patcher=lambda record: record["extra"].update(app_patcher=True))
    jobs.enable_logging()
    jobs.enable_logging()  # twice: one patcher
    import framework, orm_sqlalchemy, redis_jobs  # noqa: F401  (after enabling: they stay on)

for package in ("framework", "jobs", "orm_sqlalchemy", "redis_jobs"):
    as_library(package)
logger.info("an application line")
asyncio.run(run_a_job())
if MODE == "enabled":
    with trace.get_tracer("app").start_as_current_span("request") as span:
        as_library("jobs")
        context = span.get_span_context()
        ids = [format(context.trace_id, "032x"), format(context.span_id, "016x")]
        print(json.dumps({"request": ids}))
    for finished in exporter.get_finished_spans():
        if finished.name == "jobs.job.email.send":
            trace_id, span_id = finished.context.trace_id, finished.context.span_id
            ids = [format(trace_id, "032x"), format(span_id, "016x")]
            print(json.dumps({"job_span": ids, "attempt": finished.attributes["job.attempt"]}))
'''


def run_app(mode: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    (tmp_path / "logging_app.py").write_text(APP)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    result = subprocess.run(
        [sys.executable, "logging_app.py", mode],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    return result


def test_the_library_logs_nothing_until_the_application_enables_it(tmp_path: Path) -> None:
    result = run_app("default", tmp_path)
    lines = result.stderr.splitlines()
    assert len(lines) == 3, result.stderr  # the application's own lines, and only those
    assert "__main__" in lines[0]
    assert "an application line" in lines[0]
    assert "the handler of attempt 1" in lines[1]
    assert "the handler of attempt 2" in lines[2]
    assert result.stdout == ""


def test_enable_logging_shows_every_package_with_the_job_and_the_trace(tmp_path: Path) -> None:
    records: list[dict[str, Any]] = []
    spans: dict[int, list[str]] = {}
    request: list[str] = []
    for line in run_app("enabled", tmp_path).stdout.splitlines():
        item = json.loads(line)
        if "job_span" in item:
            spans[item["attempt"]] = item["job_span"]
        elif "request" in item:
            request = item["request"]
        else:
            records.append(item)

    by_message = {record["message"]: record for record in records}
    for package in PACKAGES:  # on, and still on for packages imported after enabling
        assert by_message[f"a line of {package}"]["name"] == f"{package}.module"
    assert all(record["extra"]["app_patcher"] for record in records)  # the app's patcher kept

    retry = next(r for r in records if r["name"] == "jobs.telemetry")
    assert retry["message"].startswith("job email.send (")
    assert "attempt 1/" in retry["message"]
    assert "retrying" in retry["message"]
    handler_lines = [by_message[f"the handler of attempt {n}"] for n in (1, 2)]
    for record, attempt in [(handler_lines[0], 1), (handler_lines[1], 2), (retry, 1)]:
        extra = record["extra"]
        assert (extra["job_type"], extra["job_key"], extra["attempt"]) == (
            "email.send",
            "order:7",
            attempt,
        )
        assert [extra["trace_id"], extra["span_id"]] == spans[attempt]

    in_request = [r for r in records if r["message"] == "a line of jobs"][-1]
    assert [in_request["extra"]["trace_id"], in_request["extra"]["span_id"]] == request
    assert "trace_id" not in by_message["an application line"]["extra"]  # no span current
