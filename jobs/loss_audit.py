"""The live loss auditor: checks, continuously and cheaply, that nothing is silently lost.

The chaos kit's checker (``jobs.testing.chaos.checker``) proves the invariants offline, over a
whole history; this runs against a production store, one bounded pass at a time
(``LossAuditor.check``), with the driver's operations (``stats``, ``workers``, ``list_jobs``,
``find_job``) and the outbox store's two audit reads (``jobs.spi.OutboxAuditReads``):

- ``outbox_unpublished``: an entry committed more than ``outbox_slo_ms`` ago is still not
  published (no relay running, or its hand-over keeps failing: the finding says which);
- ``outbox_job_missing``: a published entry whose job (by its key: the entry's own, else
  ``outbox:<entry id>``) does not exist. The entries published since the last pass are walked
  in publishing order (at most ``max_entries`` a pass), from ``lookback_ms`` ago on the first
  pass. ``lookback_ms`` must stay under the job store's retention (``JobsSettings``'s
  ``retain_completed_ms``/``retain_failed_ms``, which ``from_settings`` applies), or a job
  pruned for its age would read as lost; a job an operator deleted is found missing too (the
  audit trail, ``neverlost audit list``, says who). A missing entry stays reported by every
  later pass (it is looked up again; it goes when its job shows up or the entry is pruned);
- ``due_stuck``: a type whose oldest due job has waited more than ``due_slo_ms`` while live
  workers serve the type; ``due_no_worker``: the same with no live worker for the type;
- ``active_stuck``: an active job whose current attempt became due more than
  ``active_slo_ms`` ago (or its own ``timeout_ms``, if longer): a worker hanging on it, or a
  lease that expired and nobody reclaims (no live worker serves the type: the finding says
  so). At most ``max_active`` active jobs are looked at a pass (the newest first).

Failed jobs are not findings: a terminal failure is visible (``stats``, the dashboard); the
report counts them per type. Ages of active jobs are this process's clock against the store's
``run_at``: keep the SLOs far above the clock skew.

Each pass costs one ``stats``, one ``workers``, a few pages of active jobs, two outbox reads
and one ``find_job`` per newly published entry. ``LossAuditor.run`` repeats it every
``interval_ms``, logs one line per finding when first found (naming the entry or job), and
one when it is resolved, exports the
``neverlost.audit.*`` metrics (``jobs.metrics``), and ``health()`` is red while the last pass
found anything.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any

from loguru import logger

from .clock import Clock, to_datetime, to_epoch_ms
from .metrics import record_audit
from .settings import JobsSettings
from .spi.driver import JobDriver, WorkflowStore
from .spi.outbox_audit import (
    WORKFLOW_ENTRY_TYPE,
    OutboxAuditReads,
    PublishedEntry,
    outbox_workflow_id,
)
from .spi.records import JobInfo, JobTypeStats

__all__ = ["AuditFinding", "AuditReport", "AuditSLOs", "LossAuditor"]

_MINUTE = 60_000


@dataclass(frozen=True, slots=True, kw_only=True)
class AuditSLOs:
    """How long is too long, and how much one pass may read."""

    outbox_slo_ms: int = 5 * _MINUTE
    due_slo_ms: int = 5 * _MINUTE
    active_slo_ms: int = 60 * _MINUTE
    lookback_ms: int = 60 * _MINUTE
    max_entries: int = 200
    max_active: int = 500

    def __post_init__(self) -> None:
        for name in ("outbox_slo_ms", "due_slo_ms", "active_slo_ms", "lookback_ms"):
            value = getattr(self, name)
            if type(value) is not int or value < 0:
                raise ValueError(f"AuditSLOs.{name} must be an int >= 0 (ms), got {value!r}")
        for name in ("max_entries", "max_active"):
            value = getattr(self, name)
            if type(value) is not int or not 1 <= value <= 10_000:
                raise ValueError(f"AuditSLOs.{name} must be an int in 1..10000, got {value!r}")

    def within_retention(self, settings: JobsSettings) -> AuditSLOs:
        """These SLOs with ``lookback_ms`` no longer than the jobs are kept (minus a minute),
        so that a job pruned for its age does not read as lost."""
        kept = min(settings.retain_completed_ms, settings.retain_failed_ms) - _MINUTE
        if self.lookback_ms <= kept:
            return self
        return _replace(self, lookback_ms=max(kept, 0))


def _replace(slos: AuditSLOs, **changes: int) -> AuditSLOs:
    return AuditSLOs(**{**asdict(slos), **changes})


@dataclass(frozen=True, slots=True, kw_only=True)
class AuditFinding:
    """One violation: ``check`` (see the module), ``target`` (``entry <id>``, ``job <id>``,
    ``type <type>``), the job type, a one-line ``message`` (what and why; the target is not
    repeated in it), the age that broke the SLO."""

    check: str
    target: str
    type: str
    message: str
    age_ms: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class AuditReport:
    """One pass: ``findings`` (empty: nothing lost or stuck), what was looked at, failed jobs
    per type (visible, not findings), and whether the outbox was checked at all."""

    at: datetime
    findings: list[AuditFinding]
    entries_checked: int = 0
    active_checked: int = 0
    outbox_checked: bool = False
    backlog: bool = False
    """More published entries wait than one pass reads: the next pass goes on."""
    failed: dict[str, int] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.findings

    def counts(self) -> dict[str, int]:
        """Findings per check."""
        counted: dict[str, int] = {}
        for finding in self.findings:
            counted[finding.check] = counted.get(finding.check, 0) + 1
        return counted

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "at": self.at.isoformat(),
            "findings": [asdict(finding) for finding in self.findings],
            "counts": self.counts(),
            "entries_checked": self.entries_checked,
            "active_checked": self.active_checked,
            "outbox_checked": self.outbox_checked,
            "backlog": self.backlog,
            "failed": self.failed,
        }


class LossAuditor:
    """Audits ``driver`` (and ``outbox``, when it has ``OutboxAuditReads``) pass by pass.

    Keeps, between passes, where the walk over published entries stopped and the entries
    found missing (at most ``max_entries`` of them, looked up again each pass). ``log=False``:
    no log line per finding (the command line prints each pass itself).
    """

    def __init__(
        self,
        driver: JobDriver,
        outbox: object | None = None,
        *,
        slos: AuditSLOs | None = None,
        clock: Clock | None = None,
        log: bool = True,
    ) -> None:
        self._log_findings = log
        self._driver = driver
        self._outbox = outbox if isinstance(outbox, OutboxAuditReads) else None
        self._slos = slos or AuditSLOs()
        self._now: Callable[[], int] = clock.now_ms if clock else lambda: time.time_ns() // 10**6
        self._mark: tuple[int, str] | None = None
        self._missing: dict[str, tuple[PublishedEntry, AuditFinding]] = {}
        self._last: AuditReport | None = None
        self._logged: set[tuple[str, str]] = set()

    @property
    def slos(self) -> AuditSLOs:
        return self._slos

    @property
    def checks_outbox(self) -> bool:
        return self._outbox is not None

    def health(self) -> dict[str, Any]:
        """``healthy`` while the last pass found nothing (no pass yet: healthy)."""
        last = self._last
        if last is None:
            return {"healthy": True, "passes": 0}
        return {"healthy": last.ok, "at": last.at.isoformat(), "counts": last.counts()}

    async def check(self) -> AuditReport:
        """One pass; logs a line per finding. Store failures propagate."""
        now = self._now()
        stats = await self._driver.stats()
        workers = await self._driver.list_workers()
        served = {job_type for worker in workers for job_type in worker.types}
        findings = self._due(stats, served)
        active, active_checked = await self._active(now, stats, served)
        findings += active
        entries_checked, backlog = 0, False
        if self._outbox is not None:
            findings += await self._unpublished(self._outbox)
            entries_checked, backlog = await self._published(self._outbox, now)
            findings += [finding for _, finding in self._missing.values()]
        report = AuditReport(
            at=to_datetime(now),
            findings=findings,
            entries_checked=entries_checked,
            active_checked=active_checked,
            outbox_checked=self._outbox is not None,
            backlog=backlog,
            failed={t: s.failed for t, s in sorted(stats.items()) if s.failed},
        )
        if self._log_findings:
            self._log(findings)
        record_audit("ok" if report.ok else "violation", report.counts(), entries_checked)
        self._last = report
        return report

    def _log(self, findings: list[AuditFinding]) -> None:
        """One line per finding when first found (a finding that lasts is not logged again
        each pass), and one when it is gone."""
        seen = {(finding.check, finding.target) for finding in findings}
        for finding in findings:
            if (finding.check, finding.target) not in self._logged:
                logger.warning(
                    "loss audit: {} {}: {}", finding.check, finding.target, finding.message
                )
        for check, target in sorted(self._logged - seen):
            logger.info("loss audit: {} {} resolved", check, target)
        self._logged = seen

    async def run(
        self, interval_ms: int, on_report: Callable[[AuditReport], None] | None = None
    ) -> None:
        """Pass after pass every ``interval_ms`` until cancelled; a failed pass is logged and
        counted (``audit.result=error``), and the next one tried."""
        while True:
            try:
                report = await self.check()
            except Exception as exc:  # the store may be down for a while: keep auditing
                record_audit("error", {}, 0)
                logger.error("loss audit pass failed: {}: {}", type(exc).__name__, exc)
            else:
                if on_report is not None:
                    on_report(report)
            await asyncio.sleep(interval_ms / 1000)

    # -- jobs ------------------------------------------------------------------------------------

    def _due(self, stats: dict[str, JobTypeStats], served: set[str]) -> list[AuditFinding]:
        findings = []
        for job_type, counts in sorted(stats.items()):
            age = counts.oldest_due_age_ms
            if age is None or age <= self._slos.due_slo_ms:
                continue
            if job_type in served:
                check, why = "due_stuck", "live workers serve the type but do not claim it"
            else:
                check, why = "due_no_worker", "no live worker serves the type"
            findings.append(
                AuditFinding(
                    check=check,
                    target=f"type {job_type}",
                    type=job_type,
                    message=f"{counts.due} due job(s) of {job_type!r}, the oldest due for "
                    f"{_age(age)} (SLO {_age(self._slos.due_slo_ms)}): {why}",
                    age_ms=age,
                )
            )
        return findings

    async def _active(
        self, now: int, stats: dict[str, JobTypeStats], served: set[str]
    ) -> tuple[list[AuditFinding], int]:
        if not any(counts.active for counts in stats.values()):
            return [], 0
        findings: list[AuditFinding] = []
        checked, cursor = 0, None
        while checked < self._slos.max_active:
            limit = min(200, self._slos.max_active - checked)
            page = await self._driver.list_jobs(
                state="active", job_type=None, limit=limit, cursor=cursor
            )
            for job in page.jobs:
                finding = self._stuck(job, now, served)
                if finding is not None:
                    findings.append(finding)
            checked += len(page.jobs)
            cursor = page.next_cursor
            if cursor is None or not page.jobs:
                break
        return findings, checked

    def _stuck(self, job: JobInfo, now: int, served: set[str]) -> AuditFinding | None:
        age = now - to_epoch_ms(job.run_at)
        slo = max(self._slos.active_slo_ms, job.timeout_ms or 0)
        if age <= slo:
            return None
        why = (
            "a worker still holds it (hanging?) or its lease expired and is not reclaimed"
            if job.type in served
            else "no live worker serves the type: an expired lease is reclaimed by nobody"
        )
        return AuditFinding(
            check="active_stuck",
            target=f"job {job.id}",
            type=job.type,
            message=f"{job.type!r}, attempt {job.attempts}/{job.max_attempts}, active for "
            f"{_age(age)} since due (SLO {_age(slo)}): {why}",
            age_ms=age,
        )

    # -- the outbox ------------------------------------------------------------------------------

    async def _unpublished(self, outbox: OutboxAuditReads) -> list[AuditFinding]:
        slo = self._slos.outbox_slo_ms
        findings = []
        for entry in await outbox.overdue_entries(slo, self._slos.max_entries):
            if entry.leased:
                why = "a relay holds it now"
            elif entry.last_error:
                why = f"its hand-over fails ({entry.attempts} attempts): {entry.last_error}"
            else:
                why = "no relay took it (is a relay running?)"
            findings.append(
                AuditFinding(
                    check="outbox_unpublished",
                    target=f"entry {entry.id}",
                    type=entry.type,
                    message=f"{entry.type!r}, unpublished for {_age(entry.age_ms)} "
                    f"(SLO {_age(slo)}): {why}",
                    age_ms=entry.age_ms,
                )
            )
        return findings

    async def _published(self, outbox: OutboxAuditReads, now: int) -> tuple[int, bool]:
        """Look up the job of each entry published since the last pass (and of those found
        missing before); how many were looked up, and whether more wait."""
        for entry_id, (entry, _) in list(self._missing.items()):
            if await self._handed_over(entry):
                del self._missing[entry_id]
        start = now - self._slos.lookback_ms
        mark = self._mark if self._mark is not None and self._mark[0] >= start else (start, "")
        if self._mark is not None and self._mark[0] < start:  # publishing outran the walk
            logger.warning(
                "loss audit: fell behind; entries published from {} to {} were not checked "
                "(raise max_entries to the entries published per interval)",
                to_datetime(self._mark[0]).isoformat(timespec="seconds"),
                to_datetime(start).isoformat(timespec="seconds"),
            )
        limit = self._slos.max_entries
        entries = await outbox.published_entries(after_ms=mark[0], after_id=mark[1], limit=limit)
        for entry in entries:
            if not await self._handed_over(entry):
                self._lost(entry, now)
        if entries:
            mark = (entries[-1].published_at_ms, entries[-1].id)
        self._mark = mark
        return len(entries), len(entries) == limit

    async def _handed_over(self, entry: PublishedEntry) -> bool:
        """Whether the job the entry became is stored: its key's, or for a workflow's entry
        (``append_workflow``) any job of the workflow it became."""
        driver = self._driver
        if entry.type == WORKFLOW_ENTRY_TYPE and isinstance(driver, WorkflowStore):
            return bool(await driver.workflow_jobs(outbox_workflow_id(entry.id)))
        return await driver.find_job(entry.job_key) is not None

    def _lost(self, entry: PublishedEntry, now: int) -> None:
        if len(self._missing) >= self._slos.max_entries:
            self._missing.pop(next(iter(self._missing)))
        published = to_datetime(entry.published_at_ms).isoformat(timespec="seconds")
        self._missing[entry.id] = (
            entry,
            AuditFinding(
                check="outbox_job_missing",
                target=f"entry {entry.id}",
                type=entry.type,
                message=f"{entry.type!r}, published at {published}, but no job holds its "
                f"key {entry.job_key!r} (deleted by an operator? see `neverlost audit list`; "
                "else lost)",
                age_ms=now - entry.published_at_ms,
            ),
        )


def _age(ms: int) -> str:
    seconds = ms / 1000
    if seconds < 120:
        return f"{seconds:.0f}s"
    if seconds < 7200:
        return f"{seconds / 60:.0f}m"
    return f"{seconds / 3600:.1f}h"
