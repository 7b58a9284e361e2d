"""JobScheduler: queues each schedule's occurrences, keyed, so any number of servers may run it.

There is no leader. Every process runs a scheduler; each pass (at start, then every
``interval_ms``) enqueues the coming occurrences of every schedule with ``run_at`` = the
occurrence and the idempotency key ``<name>:<occurrence in UTC>``
(``report.nightly:2026-10-16T03:00:00Z``). The first enqueue of an occurrence stores the job;
every other server's enqueue of it is dropped by the key, atomically, in every driver. Leader
election, hostnames and process ids play no part, so the ways cron has run twice elsewhere (a
shared hostname confirming leadership, a stale leader, a re-election re-adding jobs) do not
arise.

Which occurrences a pass enqueues, at scheduler time ``now``: every occurrence in
``[now - catch_up_ms, now + interval_ms]``, and at least the first one after ``now``.

* Looking ahead one interval means a schedule more frequent than the passes loses nothing, and
  an occurrence is stored up to one interval before it is due, so servers restarting just
  before it do not lose it.
* Looking back ``catch_up_ms`` (60 s by default) means an occurrence missed by a pass that came
  late, or failed because the store was briefly down, is still queued, once (its key). The
  first pass of a scheduler catches up only the latest occurrence in that window (a server
  restarted just after 03:00 still queues 03:00), never a backlog.

Missed occurrences are not replayed. An occurrence is queued only if some scheduler asks
between ``interval_ms`` before it and ``catch_up_ms`` after it; if none does (every server was
down or failing throughout), it is skipped for good. After an hour with every server down an
hourly schedule runs at its next occurrence, not once for each hour missed: at most
``catch_up_ms`` worth of occurrences is ever caught up, and a scheduler's first pass (a new
deployment, a restart) catches up one at most. The lateness check uses a fresh clock reading
right before each enqueue, not the time the pass began.

Why a repeat is dropped however late a slow server asks. A key is free again once retention
prunes its job (``retain_completed_ms`` after it completed, possibly 0). If that happened
before a slow server's enqueue of the same occurrence arrived, the occurrence would run twice.
Two rules close that gap without relying on the retention settings:

1. Each scheduled request carries ``keep_until_ms = occurrence + catch_up_ms + KEY_MARGIN_MS``
   (one hour of margin); every driver keeps the job, and so its key, at least until then.
2. A scheduler enqueues an occurrence only while its clock reads at most ``occurrence +
   catch_up_ms`` (rule above), and each enqueue is cut off after ``enqueue_timeout_ms`` (at
   most ten minutes), so a stalled connection cannot deliver it hours later.

So every enqueue of an occurrence reaches the store before ``occurrence + catch_up_ms +
enqueue_timeout_ms + skew`` by the store's clock, where skew is how far that clock runs ahead
of the scheduler's; the job (and its key) is kept until ``occurrence + catch_up_ms + 1 h``.
Unless skew and timeout together exceed an hour, every repeat finds the key taken and is
dropped, whatever ``retain_completed_ms`` says. (A driver drops a repeat while the job exists
in any state, so a job still pending or running because workers are behind holds its key too.)

Failures: a failing enqueue (the store is down, a timeout) is logged and retried by the next
pass, which comes sooner than usual (1 s, doubling, up to ``interval_ms``); the pass loop
survives every error. Schedules are collected and validated at ``start()`` (phase 5: after the
registry has scanned the handlers), so a bad cron expression, time zone or payload fails
``run()`` with a ScheduleError naming the schedule.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from itertools import islice
from typing import TYPE_CHECKING, Literal

from loguru import logger

from .clock import Clock, SystemClock, to_datetime
from .errors import ScheduleError
from .failures import FailureStreak
from .health import StoreContact
from .queue import JobQueue
from .retry import exponential_backoff
from .schedule import Schedule, occurrence_iso
from .service import BackgroundService, ServiceState
from .settings import JobsSettings

if TYPE_CHECKING:
    from framework import ApplicationContext

    from .handlers import JobHandlerRegistry

DEFAULT_CATCH_UP_MS = 60_000
DEFAULT_ENQUEUE_TIMEOUT_MS = 30_000
MAX_ENQUEUE_TIMEOUT_MS = 600_000
KEY_MARGIN_MS = 3_600_000
MAX_OCCURRENCES_PER_PASS = 1_000
CLOSE_GRACE_S = 5.0
PASS_LOOP = "passes"


@dataclass(slots=True)
class PassReport:
    """What one pass did: keys queued (with job ids), dropped as taken, skipped, failed."""

    queued: list[tuple[str, str]] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)
    late: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)


class JobScheduler(BackgroundService):
    """Queues the occurrences of every schedule (lifecycle phase 5, auto-startup).

    Schedules come from ``schedules=``, from ``@job_handler(..., cron=...)`` handlers in
    ``registry``, and from beans of ``context`` that are a Schedule or a list or tuple of them.
    ``start()``/``stop()`` are plain methods called inside the running loop; ``close()`` waits
    for a pass in progress to end.
    """

    phase = 5
    service = "job scheduler"

    def __init__(
        self,
        queue: JobQueue,
        *,
        registry: JobHandlerRegistry | None = None,
        context: ApplicationContext | None = None,
        schedules: Iterable[Schedule] = (),
        clock: Clock | None = None,
        interval_ms: int | None = None,
        catch_up_ms: int = DEFAULT_CATCH_UP_MS,
        enqueue_timeout_ms: int = DEFAULT_ENQUEUE_TIMEOUT_MS,
        auto_startup: bool = True,
    ) -> None:
        interval = JobsSettings().schedule_interval_ms if interval_ms is None else interval_ms
        if interval <= 0:
            raise ValueError(f"interval_ms must be positive, got {interval}")
        if catch_up_ms < 0:
            raise ValueError(f"catch_up_ms must not be negative, got {catch_up_ms}")
        if not 0 < enqueue_timeout_ms <= MAX_ENQUEUE_TIMEOUT_MS:
            raise ValueError(
                f"enqueue_timeout_ms must be between 1 and {MAX_ENQUEUE_TIMEOUT_MS} (it bounds "
                f"how late an enqueue may land; see jobs.scheduler), got {enqueue_timeout_ms}"
            )
        super().__init__(queue.driver)
        self.queue = queue
        self.clock = clock or SystemClock()
        self.interval_ms = interval
        self.catch_up_ms = catch_up_ms
        self._first_pass_at: int | None = None
        self.enqueue_timeout_ms = enqueue_timeout_ms
        self.auto_startup = auto_startup
        self._registry = registry
        self._context = context
        self._given = tuple(schedules)
        self._schedules: tuple[Schedule, ...] | None = None
        self._retry_delay = exponential_backoff(min(1_000, interval), interval, jitter=0)
        self._pass_failures = FailureStreak("job scheduler pass")
        self._enqueue_failures = FailureStreak("queuing scheduled jobs")

    # -- lifecycle -----------------------------------------------------------------------------

    def _health_window_ms(self) -> int:
        """Three pass intervals."""
        return 3 * self.interval_ms

    def _health_contact(self) -> StoreContact:
        """The store's answers when there are schedules to queue; else the store is not this
        service's concern (always answered)."""
        if self._schedules:
            return self._contact
        contact = StoreContact()
        contact.answered()
        return contact

    @property
    def schedules(self) -> tuple[Schedule, ...]:
        """Every schedule, collected and validated (ScheduleError if one cannot be used)."""
        if self._schedules is None:
            self._schedules = self._collect()
        return self._schedules

    def start(self) -> None:
        """Validate the schedules, then run a pass now and every ``interval_ms``. Idempotent;
        JobsError once closed; ScheduleError (and nothing started) if a schedule is unusable."""
        if self.state is not ServiceState.CLOSED and not self.is_running:
            self._schedules = self._collect()
        super().start()

    def _on_start(self) -> None:
        if not self._schedules:
            logger.debug("job scheduler: no schedules declared")
            return
        self._supervisor.spawn(PASS_LOOP, self._loop)
        logger.info("job scheduler started: {}", ", ".join(s.key_prefix for s in self._schedules))

    def _on_stop(self) -> None:
        """End the passes (one in progress stops before its next enqueue)."""
        self._supervisor.stop()

    async def _on_close(self) -> None:
        """Wait for a pass in progress (cancelled after a few seconds).

        Cancelling an enqueue is safe: a repeat of it is dropped by its key.
        """
        await self._supervisor.close(timeout_s=CLOSE_GRACE_S)

    # -- passes --------------------------------------------------------------------------------

    async def run_pass(self) -> PassReport:
        """Enqueue every schedule's current occurrences once (what each timed pass does)."""
        return await self._pass(lambda: False)

    async def _loop(self) -> None:
        loop = asyncio.get_running_loop()
        supervisor = self._supervisor
        failures = 0
        while not supervisor.stopping(PASS_LOOP):
            started = loop.time()
            try:
                report = await self._pass(lambda: supervisor.stopping(PASS_LOOP))
                failures = failures + 1 if report.failed else 0
                self._pass_failures.succeeded()
            except Exception as exc:  # never let the loop die; the next pass tries again
                failures += 1
                self._pass_failures.failed(exc, retry_in_ms=self._retry_delay(failures))
            delay_ms = self._retry_delay(failures) if failures else self.interval_ms
            remaining = started + delay_ms / 1000 - loop.time()
            if remaining > 0:
                await supervisor.wait(asyncio.sleep(remaining))

    async def _pass(self, should_stop: Callable[[], bool]) -> PassReport:
        report = PassReport()
        now = self.clock.now_ms()
        for schedule in self.schedules:
            for occurrence in self._occurrences(schedule, now):
                if should_stop():
                    return report
                outcome = await self._enqueue(schedule, occurrence, report)
                if outcome == "timeout":
                    return report  # the store hangs: do not wait on it once per schedule
                if outcome == "failed":
                    break  # leave this schedule to the next pass, try the others
        if self._first_pass_at is None and not report.failed:
            self._first_pass_at = now  # the first pass is the first one that got through
        return report

    def _occurrences(self, schedule: Schedule, now: int) -> list[int]:
        """Occurrences in the catch-up window and up to the next pass; at least one ahead."""
        # The first pass catches up only the latest occurrence: what fell due before this
        # scheduler ran is not a backlog to replay. Later passes catch up all they missed since.
        if self._first_pass_at is None:
            missed = deque(schedule.occurrences(now - self.catch_up_ms, now), 1)
        else:
            since = max(now - self.catch_up_ms, self._first_pass_at)
            missed = deque(schedule.occurrences(since, now), MAX_OCCURRENCES_PER_PASS)
        coming = list(
            islice(schedule.occurrences(now + 1, now + self.interval_ms), MAX_OCCURRENCES_PER_PASS)
        )
        if not coming:
            upcoming = schedule.next_after(now)
            coming = [upcoming] if upcoming is not None else []
        elif len(coming) == MAX_OCCURRENCES_PER_PASS:
            logger.warning(
                "schedule {} occurs more than {} times per pass; shorten interval_ms",
                schedule.key_prefix,
                MAX_OCCURRENCES_PER_PASS,
            )
        return [*missed, *coming]

    async def _enqueue(
        self, schedule: Schedule, occurrence: int, report: PassReport
    ) -> Literal["done", "failed", "timeout"]:
        """Enqueue one occurrence, or record why not (failures are logged here)."""
        key = schedule.key(occurrence)
        late_ms = self.clock.now_ms() - occurrence
        if late_ms > self.catch_up_ms:
            logger.info(
                "schedule {}: {} is {} ms past, not replayed",
                schedule.key_prefix,
                occurrence_iso(occurrence),
                late_ms,
            )
            report.late.append(key)
            return "done"
        try:
            job_id = await self.queue._submit(
                schedule.job,
                schedule.job_payload,
                delay_ms=None,
                run_at=to_datetime(occurrence),
                max_attempts=None,
                timeout_ms=None,
                key=key,
                keep_until_ms=occurrence + self.catch_up_ms + KEY_MARGIN_MS,
                timeout_s=self.enqueue_timeout_ms / 1000,
            )
        except Exception as exc:
            self._store_failed(exc)
            self._enqueue_failures.failed(exc, then=f"{key} is left to the next pass")
            report.failed.append(key)
            return "timeout" if isinstance(exc, TimeoutError) else "failed"
        self._contact.answered()
        self._enqueue_failures.succeeded()
        if job_id is None:
            report.dropped.append(key)
            logger.debug("schedule {}: {} already queued", schedule.key_prefix, key)
        else:
            report.queued.append((key, job_id))
            logger.info("schedule {}: queued {} as job {}", schedule.key_prefix, key, job_id)
        return "done"

    # -- collecting schedules ------------------------------------------------------------------

    def _collect(self) -> tuple[Schedule, ...]:
        found: list[tuple[Schedule, str]] = [
            (s, "JobScheduler(schedules=...)") for s in self._given
        ]
        if self._registry is not None:
            for handler in self._registry.handlers():
                options = handler.options
                if options.cron is not None:
                    schedule = Schedule(
                        cron=options.cron,
                        job=options.definition or options.job_type,
                        timezone=options.timezone or "UTC",
                    )
                    found.append((schedule, f"@job_handler on {handler.source}"))
        if self._context is not None:
            for name, bean in self._context.beans():
                found.extend((schedule, f"bean {name!r}") for schedule in _schedules_in(bean))
        by_name: dict[str, str] = {}
        for schedule, source in found:
            first = by_name.get(schedule.key_prefix)
            by_name[schedule.key_prefix] = source
            if first is not None:
                raise ScheduleError(
                    f"two schedules are named {schedule.key_prefix!r} ({first} and {source}); "
                    "give one a name= so their keys differ"
                )
            self._check_payload(schedule)
        return tuple(schedule for schedule, _ in found)

    def _check_payload(self, schedule: Schedule) -> None:
        try:
            occurrence = self.clock.now_ms() // 1000 * 1000
            self.queue.build_request(
                schedule.job,
                schedule.job_payload,
                run_at=to_datetime(occurrence),
                key=schedule.key(occurrence),
            )
        except ValueError as exc:  # PayloadError, JobTypeError, a bad definition payload
            raise ScheduleError(
                f"schedule {schedule.key_prefix!r}: its payload cannot be queued: {exc}"
            ) from exc


def _schedules_in(bean: object) -> list[Schedule]:
    """A Schedule bean, or the Schedules of a list/tuple bean made only of them."""
    if isinstance(bean, Schedule):
        return [bean]
    if isinstance(bean, list | tuple) and bean and all(isinstance(s, Schedule) for s in bean):
        return list(bean)
    return []
