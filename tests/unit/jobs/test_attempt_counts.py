"""One attempt count everywhere: the log line of a terminal failure shows the limit the job's
record shows (``jobs show``: "N of M"), also after an operator's retry granted one more."""

from __future__ import annotations

from typing import Any

from jobs import InProcessJobDriver, JobHandlerRegistry, JobQueue, JobRunner
from tests.support import captured_logs, wait_until


async def _failed_with(driver: InProcessJobDriver, job_id: str, attempts: int) -> bool:
    info = await driver.get_job(job_id)
    return info is not None and info.state == "failed" and info.attempts == attempts


async def test_the_log_and_the_record_agree_after_operator_retries() -> None:
    driver = InProcessJobDriver()
    registry = JobHandlerRegistry()

    async def fails(payload: Any) -> None:
        raise KeyError("missing")

    registry.register("t", fails, max_attempts=2, backoff=lambda attempt: 0)
    runner = JobRunner(driver, registry)
    queue = JobQueue(driver)
    with captured_logs() as logs:
        job_id = await queue.enqueue("t")
        assert job_id is not None
        runner.start()
        await wait_until(lambda: _failed_with(driver, job_id, 2))
        for granted in (3, 4):  # each operator retry gives exactly one more attempt
            assert await queue.retry(job_id)
            await wait_until(lambda attempts=granted: _failed_with(driver, job_id, attempts))
    await runner.close()
    failures = [r["message"] for r in logs if r["level"] == "ERROR"]
    assert [line.split(": ")[0] for line in failures] == [
        f"job t ({job_id}) failed for good after attempt 2/2",
        f"job t ({job_id}) failed for good after attempt 3/3",
        f"job t ({job_id}) failed for good after attempt 4/4",
    ]
    info = await driver.get_job(job_id)
    assert info is not None
    assert (info.attempts, info.max_attempts) == (4, 4)  # `jobs show`: "4 of 4"
