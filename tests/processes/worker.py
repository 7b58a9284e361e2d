"""A worker process for the process-level tests: ``python -m tests.processes.worker``.

Runs a JobsAutoConfiguration context on the given store. Its handlers append one JSON line per
event to a ledger file (opened in append mode and fsynced, so a SIGKILL cannot take back what
was written). It prints ``ready`` once the runner is started and drains on SIGTERM.

Job types:
- ``ledger.sleep``  sleeps ``payload["ms"]``.
- ``ledger.block``  the first delivery blocks until the process is killed; later ones return.
- ``ledger.stale``  the first delivery blocks the event loop (no heartbeats can run) until
  another has started elsewhere (``payload["block_ms"]`` at most), then raises; later ones
  return.
- ``ledger.wait``   waits for its abort signal and records the reason as ``stopped:<reason>``.
- ``ledger.once``   max_attempts=1; the first delivery blocks until the process is killed,
  later ones return (a kill is a stall: attempt 1 runs again).
- ``ledger.limited`` at most 3 at once and 20 a second across every worker
  (``global_concurrency``, ``rate_limit``); sleeps ``payload["ms"]``.
- ``ledger.free``   returns at once, unlimited and unrecorded (a drain at full speed).

A reclaim runs the attempt that stalled again, with its number: "first delivery" is told by
the ledger (this start is the job's first), not by ``ctx.attempt``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import sys
import time
from typing import Any

from framework import ApplicationBuilder, configuration, entry
from jobs import JOB_RUNNER, JobContext, JobDriver, JobsAutoConfiguration, JobsSettings, job_handler
from jobs.logs import enable_logging
from jobs.tokens import JOB_DRIVER, JOBS_SETTINGS
from tests.stores import StoreTarget


class Ledger:
    def __init__(self, path: str) -> None:
        self.path = path

    def starts(self, job_id: str) -> int:
        """How many deliveries of the job have started, in any process."""
        try:
            with open(self.path) as ledger:
                lines = [json.loads(line) for line in ledger if line.strip()]
        except FileNotFoundError:
            return 0
        return sum(1 for e in lines if e["event"] == "start" and e["job"] == job_id)

    def write(self, event: str, ctx: JobContext, *, durable: bool = True) -> None:
        entry = {
            "event": event,
            "job": ctx.id,
            "attempt": ctx.attempt,
            "pid": os.getpid(),
            "at": time.time(),
        }
        line = json.dumps(entry)
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, (line + "\n").encode())
            if durable:  # a SIGKILL cannot take back what was written
                os.fsync(fd)
        finally:
            os.close(fd)


class LedgerWorker:
    def __init__(self, ledger: Ledger) -> None:
        self.ledger = ledger

    @job_handler("ledger.sleep", max_attempts=5)
    async def sleep(self, payload: dict[str, Any], ctx: JobContext) -> None:
        self.ledger.write("start", ctx)
        await asyncio.sleep(payload.get("ms", 0) / 1000)
        self.ledger.write("end", ctx)

    @job_handler("ledger.block", max_attempts=5)
    async def block(self, payload: Any, ctx: JobContext) -> None:
        self.ledger.write("start", ctx)
        if self.ledger.starts(ctx.id) == 1:
            await asyncio.Event().wait()
        self.ledger.write("end", ctx)

    @job_handler("ledger.wait")
    async def wait(self, payload: Any, ctx: JobContext) -> None:
        self.ledger.write("start", ctx)
        try:
            await ctx.signal.wait()
        finally:
            self.ledger.write(f"stopped:{ctx.signal.reason}", ctx)

    @job_handler("ledger.once", max_attempts=1)
    async def once(self, payload: Any, ctx: JobContext) -> None:
        self.ledger.write("start", ctx)
        if self.ledger.starts(ctx.id) == 1:
            await asyncio.Event().wait()
        self.ledger.write("end", ctx)

    @job_handler("ledger.limited", global_concurrency=3, rate_limit="20/s")
    async def limited(self, payload: dict[str, Any], ctx: JobContext) -> None:
        # no fsync: no worker is killed here, and a write that blocks the loop for a disk
        # flush would delay the starts of the jobs behind it (their times are the test's)
        self.ledger.write("start", ctx, durable=False)
        await asyncio.sleep(payload.get("ms", 0) / 1000)
        self.ledger.write("end", ctx, durable=False)

    @job_handler("ledger.free")
    async def free(self, payload: Any) -> None:
        return None

    @job_handler("ledger.stale", max_attempts=5)
    async def stale(self, payload: dict[str, Any], ctx: JobContext) -> None:
        self.ledger.write("start", ctx)
        if self.ledger.starts(ctx.id) == 1:
            # Block the loop (no heartbeat can run) until another worker has reclaimed the job,
            # or block_ms at most: a fixed sleep would race the other worker's start-up.
            deadline = time.monotonic() + payload["block_ms"] / 1000
            while time.monotonic() < deadline and self.ledger.starts(ctx.id) < 2:
                time.sleep(0.05)  # noqa: ASYNC251 - blocking the loop is the point
            self.ledger.write("woke", ctx)
            raise RuntimeError("the stale worker woke up and failed")
        self.ledger.write("end", ctx)


async def main(argv: list[str]) -> int:
    enable_logging()  # this worker's stderr is its log, kept for the test's diagnostics
    parser = argparse.ArgumentParser()
    parser.add_argument("--target", required=True, help="StoreTarget as JSON")
    parser.add_argument("--ledger", required=True)
    parser.add_argument("--lease-ms", type=int, default=30_000)
    parser.add_argument("--concurrency", type=int, default=10)
    args = parser.parse_args(argv)
    target = StoreTarget.from_json(args.target)
    settings = JobsSettings(
        lease_ms=args.lease_ms, concurrency=args.concurrency, poll_interval_ms=200
    )
    ledger = Ledger(args.ledger)

    @configuration
    class WorkerConfiguration:
        @entry(JOB_DRIVER)
        def job_driver(self) -> JobDriver:
            return target.open()

        @entry(JOBS_SETTINGS)
        def jobs_settings(self) -> JobsSettings:
            return settings

        @entry()
        def ledger_worker(self) -> LedgerWorker:
            return LedgerWorker(ledger)

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    context = await ApplicationBuilder([JobsAutoConfiguration, WorkerConfiguration]).run()
    try:
        context.get_value(JOB_RUNNER).start()
        print("ready", flush=True)
        await stop.wait()
    finally:
        await context.close()
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main(sys.argv[1:])))
