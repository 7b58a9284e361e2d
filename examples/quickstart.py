"""Quickstart: a handler on a bean, a queue, a runner — on the in-process driver.

Run: ``python -m examples.quickstart``
"""

from __future__ import annotations

import asyncio
from typing import Any

from framework import ApplicationBuilder, configuration, entry
from jobs import (
    JOB_DRIVER,
    JOB_QUEUE,
    JOB_RUNNER,
    JobContext,
    JobsAutoConfiguration,
    job_handler,
)


class EmailWorker:
    """Sends emails; a flaky mail server fails the first try of every second message."""

    def __init__(self) -> None:
        self.sent: list[str] = []
        self.all_sent = asyncio.Event()
        self.expected = 0

    @job_handler("email.send", max_attempts=5, timeout_ms=30_000)
    async def send(self, payload: dict[str, Any], ctx: JobContext) -> None:
        if payload["flaky"] and ctx.attempt == 1:
            raise ConnectionError("mail server busy")
        self.sent.append(f"{payload['to']} (attempt {ctx.attempt})")
        if len(self.sent) == self.expected:
            self.all_sent.set()


@configuration
class AppConfiguration:
    @entry()
    def email_worker(self) -> EmailWorker:
        return EmailWorker()


async def main() -> int:
    async with await ApplicationBuilder([JobsAutoConfiguration, AppConfiguration]).run() as context:
        worker = context.get_value("email_worker")
        queue = context.get_value(JOB_QUEUE)
        runner = context.get_value(JOB_RUNNER)
        runner.start()

        worker.expected = 3
        ids = [
            await queue.enqueue("email.send", {"to": f"user{n}@example.com", "flaky": n == 2})
            for n in range(1, 4)
        ]
        receipt = await queue.enqueue("receipt.send", {"invoice": 7}, key="receipt:7")
        repeat = await queue.enqueue("receipt.send", {"invoice": 7}, key="receipt:7")
        print(f"queued {len(ids)} emails; receipt job {receipt}; the repeat was dropped: {repeat}")

        await asyncio.wait_for(worker.all_sent.wait(), timeout=10)
        await runner.close()  # drains what is in flight

        driver = context.get_value(JOB_DRIVER)
        for line in sorted(worker.sent):
            print(f"sent to {line}")
        print(f"job counts: {await driver.counts()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
