"""A chaos worker process: ``python -m jobs.testing.chaos.worker --store JSON --ledger PATH``.

Runs a runner (and, when the store has an outbox, a relay) on the store. Its handlers write a
``start`` and an ``end`` line to the ledger around each execution, so the checker can count
executions per job, tell which process held them and, for a workflow's jobs, in which order
they ran. Prints ``ready`` once started; SIGTERM
drains and exits 0.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
from typing import Any

from framework import ApplicationBuilder, configuration, entry
from jobs import (
    JOB_DRIVER,
    JOB_RUNNER,
    JOBS_SETTINGS,
    OUTBOX_RELAY,
    OUTBOX_STORE,
    JobContext,
    JobDriver,
    JobOutboxPublisher,
    JobQueue,
    JobsAutoConfiguration,
    JobsSettings,
    OutboxRelay,
    OutboxStore,
    job_handler,
)
from jobs.logs import enable_logging
from jobs.spi import SQLOutboxSite

from .effects import EFFECT, EffectsTarget, EffectWriter
from .ledger import Ledger
from .stores import ChaosStore

WORK = "chaos.work"
ORDER = "chaos.order"
STEP = "chaos.step"
"""A job of a chaos workflow; its payload names the workflow and the job's place in it."""


class ChaosHandlers:
    def __init__(
        self, ledger: Ledger, handler_ms: int, effects: EffectWriter | None = None
    ) -> None:
        self.ledger = ledger
        self.handler_s = handler_ms / 1000
        self.effects = effects

    async def _execute(self, ctx: JobContext, slower: int = 1, **fields: Any) -> None:
        self.ledger.write("start", job=ctx.id, attempt=ctx.attempt, stalls=ctx.stalls, **fields)
        await asyncio.sleep(self.handler_s * slower)
        self.ledger.write("end", job=ctx.id, attempt=ctx.attempt, stalls=ctx.stalls, **fields)

    @job_handler(WORK)
    async def work(self, payload: dict[str, Any], ctx: JobContext) -> None:
        await self._execute(ctx, n=payload["n"])

    @job_handler(ORDER)
    async def order(self, payload: dict[str, Any], ctx: JobContext) -> None:
        await self._execute(ctx, order=payload["order"])

    @job_handler(STEP)
    async def step(self, payload: dict[str, Any], ctx: JobContext) -> None:
        """A workflow's job: ``wf`` (the run's number of the workflow) and ``step`` (the
        job's index in it) go to the ledger, whose order the checker reads the DAG's by; it
        runs ``slower`` times as long as the others (a group's last child: a callback released
        before it completed would start while it still runs)."""
        slower = int(payload.get("slower", 1))
        await self._execute(ctx, slower, wf=payload["wf"], step=payload["step"])

    @job_handler(EFFECT)
    async def effect(self, payload: dict[str, Any], ctx: JobContext) -> None:
        """Commit one effect row (through the inbox, or not: the control), then wait."""
        if self.effects is None:
            raise RuntimeError("this chaos worker was started without --effects")
        fields = {"attempt": ctx.attempt, "stalls": ctx.stalls, "n": payload["n"]}
        self.ledger.write("start", job=ctx.id, **fields)
        await self.effects.write(ctx, self.handler_s)
        self.ledger.write("end", job=ctx.id, **fields)


def worker_configuration(
    store: ChaosStore,
    ledger: Ledger,
    settings: JobsSettings,
    handler_ms: int,
    effects: EffectWriter | None = None,
) -> list[type]:
    @configuration
    class ChaosWorkerConfiguration:
        @entry(JOBS_SETTINGS)
        def jobs_settings(self) -> JobsSettings:
            return settings

        @entry()
        def chaos_handlers(self) -> ChaosHandlers:
            return ChaosHandlers(ledger, handler_ms, effects)

    if store.outbox_url is None:

        @configuration
        class ChaosJobsConfiguration:
            @entry(JOB_DRIVER)
            def job_driver(self) -> JobDriver:
                if effects is not None and effects.target.url == store.job_url:
                    # the jobs on the effects' database: one engine (SQLite: one writer gate)
                    return effects.site.open_driver(prefix=store.namespace)
                return store.open_driver()

        return [ChaosWorkerConfiguration, ChaosJobsConfiguration]

    @configuration
    class ChaosOutboxConfiguration:
        @entry()
        def outbox_site(self) -> SQLOutboxSite:
            return store.open_outbox()

        @entry(OUTBOX_STORE)
        def outbox_store(self, outbox_site: SQLOutboxSite) -> OutboxStore:
            return outbox_site.outbox

        @entry(JOB_DRIVER)
        def job_driver(self, outbox_site: SQLOutboxSite) -> JobDriver:
            return store.open_driver(outbox_site)

        @entry(OUTBOX_RELAY)
        def outbox_relay(self, outbox_store: OutboxStore, job_queue: JobQueue) -> OutboxRelay:
            # a killed relay's entries come back after one lease: keep it as short as the jobs'
            return OutboxRelay(
                outbox_store,
                JobOutboxPublisher(job_queue),
                lease_ms=settings.lease_ms,
                poll_interval_ms=settings.poll_interval_ms,
            )

    return [ChaosWorkerConfiguration, ChaosOutboxConfiguration]


async def main(argv: list[str]) -> int:
    enable_logging()  # this worker's stderr is its log, kept for the test's diagnostics
    parser = argparse.ArgumentParser(prog="python -m jobs.testing.chaos.worker")
    parser.add_argument("--store", required=True, help="a ChaosStore as JSON")
    parser.add_argument("--ledger", required=True)
    parser.add_argument("--lease-ms", type=int, default=3_000)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--handler-ms", type=int, default=5)
    parser.add_argument("--effects", help="an EffectsTarget as JSON (the effects variant)")
    args = parser.parse_args(argv)
    store = ChaosStore.from_json(args.store)
    effects: EffectWriter | None = None
    if args.effects:
        target = EffectsTarget.from_json(args.effects)
        effects = EffectWriter(target, target.open_site())
    settings = JobsSettings(
        lease_ms=args.lease_ms, concurrency=args.concurrency, poll_interval_ms=200
    )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    configurations = worker_configuration(
        store, Ledger(args.ledger), settings, args.handler_ms, effects
    )
    context = await ApplicationBuilder([JobsAutoConfiguration, *configurations]).run()
    try:
        context.get_value(JOB_RUNNER).start()
        relay: OutboxRelay | None = context.get_value(OUTBOX_RELAY) if store.outbox_url else None
        if relay is not None and not relay.is_running:
            relay.start()
        print("ready", flush=True)
        await stop.wait()
    finally:
        await context.close()
        if effects is not None:
            await effects.site.close()
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main(sys.argv[1:])))
