"""``LossAuditService``: the live loss auditor as a service a worker process runs.

Declare it as a bean and ``neverlost worker`` starts it (``auto_startup``) and serves its
health on ``/healthz`` beside the runner's::

    @entry()
    def loss_audit(self, job_driver: JobDriver, outbox_store: OutboxStore,
                   jobs_settings: JobsSettings) -> LossAuditService:
        return LossAuditService(job_driver, outbox_store, settings=jobs_settings)

A pass runs every ``interval_ms`` under a supervisor (``jobs.supervision``). ``health()`` is red
while the last pass found something (each finding is a reason, naming the entry, job or type),
when the store has not answered within three intervals, or when the loop is down. One auditor
is enough for a deployment: each process that runs one reads the same store (the reads are
bounded; several just repeat them).
"""

from __future__ import annotations

import asyncio
import dataclasses
from typing import ClassVar

from loguru import logger

from .health import Health
from .loss_audit import AuditReport, AuditSLOs, LossAuditor
from .service import BackgroundService
from .settings import JobsSettings
from .spi.driver import JobDriver

__all__ = ["LossAuditService"]

AUDIT_LOOP = "loss audit"
MAX_REASONS = 10
"""At most this many findings are named in ``health()``'s reasons (then a count)."""


class LossAuditService(BackgroundService):
    """Runs a ``LossAuditor`` pass every ``interval_ms`` (default 30 s)."""

    service: ClassVar[str] = "loss auditor"
    phase = 30

    def __init__(
        self,
        driver: JobDriver,
        outbox: object | None = None,
        *,
        slos: AuditSLOs | None = None,
        settings: JobsSettings | None = None,
        interval_ms: int = 30_000,
        auto_startup: bool = True,
    ) -> None:
        super().__init__(driver)
        if type(interval_ms) is not int or interval_ms <= 0:
            raise ValueError(f"interval_ms must be a positive int, got {interval_ms!r}")
        slos = slos or AuditSLOs()
        if settings is not None:
            slos = slos.within_retention(settings)
        self.auditor = LossAuditor(driver, outbox, slos=slos)
        self.interval_ms = interval_ms
        self.auto_startup = auto_startup
        self.last_report: AuditReport | None = None

    def _on_start(self) -> None:
        self._supervisor.spawn(AUDIT_LOOP, self._loop)
        what = "jobs and outbox" if self.auditor.checks_outbox else "jobs"
        logger.info("loss auditor started: the {}, every {} ms", what, self.interval_ms)

    def _on_stop(self) -> None:
        self._supervisor.stop()

    async def _on_close(self) -> None:
        await self._supervisor.close(timeout_s=5.0)

    async def _loop(self) -> None:
        while not self._supervisor.stopping(AUDIT_LOOP):
            try:
                report = await self.auditor.check()
            except Exception as exc:  # the store may be down: counted, logged, tried again
                self._store_failed(exc)
                logger.error("loss audit pass failed: {}: {}", type(exc).__name__, exc)
            else:
                self._contact.answered()
                self.last_report = report
            await self._supervisor.wait(asyncio.sleep(self.interval_ms / 1000))

    def _health_window_ms(self) -> int:
        return 3 * self.interval_ms

    def health(self) -> Health:
        """The service's health, red too while the last pass found anything."""
        health = super().health()
        report = self.last_report
        if report is None or report.ok:
            return health
        named = [f"{f.check} {f.target}: {f.message}" for f in report.findings[:MAX_REASONS]]
        if len(report.findings) > MAX_REASONS:
            named.append(f"... and {len(report.findings) - MAX_REASONS} more finding(s)")
        return dataclasses.replace(health, healthy=False, reasons=(*health.reasons, *named))
