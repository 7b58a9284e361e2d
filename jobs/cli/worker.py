"""``neverlost worker APP``: one worker process, from boot to a drained exit.

Boot: build the APP's context without starting it, wait for every store it will use to answer
(the job driver, the outbox store, the scheduler's store: ``jobs.cli.readiness``; retrying
until ``--startup-timeout``, exiting 1 at once on a failure that waiting cannot cure), then
start the lifecycle beans in phase order, with the runner, the outbox relay (when there is an
outbox store) and the scheduler as the options say.

Signals: the first SIGTERM or SIGINT stops claiming (and the scheduler and relay), lets the
jobs in flight finish up to ``--drain-timeout``, closes the context and exits 0; jobs still
running at the deadline are cancelled and handed back to the store at no cost (``release``:
they run again at once elsewhere, no attempt spent). A second signal cancels what is in flight
at once (handed back likewise) and exits 1.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import signal
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from loguru import logger

from framework import ApplicationContext, FrameworkError, LifecycleError, start_lifecycles

from ..errors import JobTypeError
from ..loss_audit_service import LossAuditService
from ..options import QueueWeights
from ..runner import JobRunner
from ..tokens import JOB_DRIVER, JOB_QUEUE, JOB_RUNNER, JOB_SCHEDULER, OUTBOX_RELAY
from .burst import nothing_due
from .errors import CliUsageError, StoreError
from .loading import load_builder
from .readiness import store_probes, wait_for_stores
from .running import STORE_FAILURES
from .target import describe_store

if TYPE_CHECKING:
    from .health import HasHealth, HealthServer

DRAIN_POLL_S = 0.05


def describe_queues(queues: QueueWeights) -> str:
    """``critical, default`` (strict order) or ``critical=3, default=1`` (weights)."""
    if queues.weights is None:
        return ", ".join(queues.names)
    return ", ".join(f"{n}={w}" for n, w in zip(queues.names, queues.weights, strict=True))
STARTUP_RETRY_MAX_S = 2.0


@dataclass(frozen=True, slots=True, kw_only=True)
class WorkerOptions:
    app: str
    concurrency: int | None = None
    types: tuple[str, ...] = ()
    queues: QueueWeights | None = None
    burst: bool = False
    relay: bool = True
    scheduler: bool = True
    drain_timeout_s: float = 25.0
    startup_timeout_s: float = 30.0
    health_port: int | None = None
    health_host: str = "0.0.0.0"


class WorkerProcess:
    """Runs one worker until a signal (or, with ``burst``, until nothing is due); the exit code
    is 0 for a drained shutdown and 1 when a second signal cut the drain short."""

    def __init__(self, options: WorkerOptions) -> None:
        self.options = options
        self.signals = 0
        self.stop_requested = asyncio.Event()
        self.abort_requested = asyncio.Event()
        self.context: ApplicationContext | None = None
        self.runner: JobRunner | None = None
        self.ready = asyncio.Event()

    async def run(self) -> int:
        self.context = context = await self._build()
        runner: JobRunner | None = None
        server: HealthServer | None = None
        try:
            driver = context.get_value(JOB_DRIVER)
            self._install_signals()
            await self._wait_for_stores(context)
            if self.stop_requested.is_set():
                logger.info("stopped before the store answered")
                return 0
            self.runner = runner = self._runner(context)
            await self._start(context)
            runner.start()
            server = self._start_health(context, runner)
            logger.info(
                "worker ready: {} from queue(s) {} on {}, concurrency {}, pid {}",
                ", ".join(sorted(runner.registry.types)) or "no job types",
                describe_queues(runner.queues),
                describe_store(driver),
                runner.settings.concurrency,
                os.getpid(),
            )
            self.ready.set()
            await self._serve(context, runner)
            code = await self._drain(context, runner)
        finally:
            if server is not None:
                await server.close()
            if runner is not None:
                await runner.close(drain_timeout_ms=0)  # idempotent; a failed boot leaves none
            await context.close()
        logger.info("worker stopped")
        return code

    # -- boot ----------------------------------------------------------------------------------

    async def _build(self) -> ApplicationContext:
        builder = load_builder(self.options.app)
        try:
            return await builder.run(start=False)
        except FrameworkError as exc:
            raise CliUsageError(f"APP {self.options.app!r}: {_one_line(exc)}") from None

    async def _wait_for_stores(self, context: ApplicationContext) -> None:
        """Ask every store this worker will use until it answers (``jobs.cli.readiness``):
        the job driver, the outbox store (with the relay), the scheduler's store (with the
        scheduler). A permanent failure, or none answering by the startup timeout, exits 1
        naming the store."""
        probes = store_probes(context, relay=self.options.relay, scheduler=self.options.scheduler)
        await wait_for_stores(probes, self.options.startup_timeout_s, self.stop_requested)

    async def _start(self, context: ApplicationContext) -> None:
        try:
            await start_lifecycles(context, self._starts)
        except LifecycleError as exc:
            cause = exc.__cause__
            if isinstance(cause, STORE_FAILURES):
                raise StoreError(_one_line(exc)) from None  # "starting bean ... failed: ..."
            raise CliUsageError(f"APP {self.options.app!r}: {_one_line(exc)}") from None

    def _runner(self, context: ApplicationContext) -> JobRunner:
        """The context's runner, or one like it with ``--concurrency`` / ``--types`` /
        ``--queues`` applied."""
        base = context.get_value(JOB_RUNNER)
        options = self.options
        if options.concurrency is None and not options.types and options.queues is None:
            return base
        registry = base.registry
        if self.options.types:
            if not registry.is_running:
                registry.start()  # scan the beans now, to check the types against them
            try:
                registry = registry.only(self.options.types)
            except JobTypeError as exc:
                raise CliUsageError(f"--types: {exc}") from None
        settings = base.settings
        if self.options.concurrency is not None:
            settings = dataclasses.replace(settings, concurrency=self.options.concurrency)
        if options.queues is not None:
            settings = dataclasses.replace(settings, queues=options.queues)
        return JobRunner(base.driver, registry, settings, backoff=base.backoff)

    def _starts(self, name: str, bean: object) -> bool:
        if name == JOB_RUNNER.name:
            return False  # started below, once the rest is up
        if name == JOB_SCHEDULER.name:
            return self.options.scheduler
        if name == OUTBOX_RELAY.name:
            return self.options.relay
        return bool(getattr(bean, "auto_startup", False))

    def _start_health(self, context: ApplicationContext, runner: JobRunner) -> HealthServer | None:
        """Serve /healthz on the runner and on the relay, scheduler and loss auditor this
        process runs."""
        if self.options.health_port is None:
            return None
        from .health import HealthServer  # the web stack (dashboard extra) only when asked

        services: list[HasHealth] = [runner]
        for token in (OUTBOX_RELAY, JOB_SCHEDULER):
            if token.name in context and context.get_value(token.name).is_running:
                services.append(context.get_value(token.name))
        services.extend(  # a LossAuditService bean: red while the auditor finds something
            bean
            for _, bean in context.beans()
            if isinstance(bean, LossAuditService) and bean.is_running
        )
        server = HealthServer(services, self.options.health_port, self.options.health_host)
        server.start()
        return server

    # -- running and stopping ------------------------------------------------------------------

    def _install_signals(self) -> None:
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, self._on_signal, signum)

    def _on_signal(self, signum: int) -> None:
        self.signals += 1
        name = signal.Signals(signum).name
        if self.signals == 1:
            logger.info("{}: draining (a second signal cancels the jobs in flight)", name)
            self.stop_requested.set()
        else:
            logger.warning("{} again: cancelling the jobs in flight (handed back)", name)
            self.abort_requested.set()

    async def _serve(self, context: ApplicationContext, runner: JobRunner) -> None:
        if not self.options.burst:
            await self.stop_requested.wait()
            return
        queue = context.get_value(JOB_QUEUE)
        relay = context.get_value(OUTBOX_RELAY) if OUTBOX_RELAY.name in context else None
        interval_s = min(runner.settings.poll_interval_ms / 1000, 0.2)
        while not self.stop_requested.is_set():
            if await nothing_due(queue, runner, relay):
                logger.info("burst: nothing due for this worker; stopping")
                return
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.stop_requested.wait(), interval_s)

    async def _drain(self, context: ApplicationContext, runner: JobRunner) -> int:
        """Stop claiming, wait for the jobs in flight (or the deadline or a second signal)."""
        runner.stop()
        for token in (JOB_SCHEDULER, OUTBOX_RELAY):
            if token.name in context:
                bean = context.get_value(token.name)
                if bean.is_running:
                    bean.stop()
        deadline = time.monotonic() + self.options.drain_timeout_s
        while runner.in_flight and not self.abort_requested.is_set():
            if time.monotonic() >= deadline:
                logger.warning(
                    "{} job(s) still running after the drain timeout of {:g} s",
                    runner.in_flight,
                    self.options.drain_timeout_s,
                )
                break
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.abort_requested.wait(), DRAIN_POLL_S)
        aborted = self.abort_requested.is_set()
        await runner.close(drain_timeout_ms=0)  # cancels what is left and hands it back
        return 1 if aborted else 0


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())
