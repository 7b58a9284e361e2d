"""The project's OpenTelemetry metrics (meter ``neverlost``), in one place.

Instruments, and the attributes they carry:

- ``jobs.executions`` (counter): one per settled attempt; ``job.type``, ``job.outcome``
  (completed, retry, failed, lease_lost, cancelled: an operator cancelled it while it ran,
  detached).
- ``jobs.duration`` (histogram, ms): each attempt's run time; ``job.type``, ``job.outcome``.
- ``jobs.lease.lost`` (counter): attempts whose lease was taken over; ``job.type``.
- ``jobs.enqueued`` (counter): jobs stored (an enqueue dropped for its key is not counted);
  ``job.type``.
- ``outbox.published`` (counter): outbox entries handed over and marked; ``outbox.entry.type``.
- ``outbox.lag`` (gauge, ms): the age of the oldest unpublished entry, 0 when there is none,
  for each outbox store a relay runs on; ``outbox.table``.
- ``jobs.queue.depth`` (gauge): jobs per ``job.type`` and ``job.state`` (due, scheduled,
  active, completed, failed, cancelled), for each store a runner works on; and
  ``jobs.queue.oldest_due_age`` (gauge, ms) per ``job.type``.

- ``neverlost.audit.passes`` (counter): passes of the live loss auditor (``jobs.loss_audit``);
  ``audit.result`` (ok, violation, error).
- ``neverlost.audit.violations`` (gauge): what the auditor's last pass found, per
  ``audit.check`` (outbox_unpublished, outbox_job_missing, due_stuck, due_no_worker,
  active_stuck), 0 for a check that found nothing.
- ``neverlost.audit.entries.checked`` (counter): published outbox entries whose job the auditor
  looked up.

The gauges are read from the store (``stats()``, or ``counts()`` for a driver without it; the
outbox store's ``oldest_unpublished_age_ms()``) only when a metric reader collects, at most
once per ``SAMPLE_INTERVAL_S``, in the background on the runner's or relay's event loop: a
collection reports the last reading. With no meter provider set, nothing is ever read and the
counters are the API's no-ops, and not even called: the ``record_*`` functions return at once
while no provider is set (``metering()``), as they run for every job.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Collection, Iterable, Sequence
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from loguru import logger
from opentelemetry import metrics
from opentelemetry.environment_variables import OTEL_PYTHON_METER_PROVIDER
from opentelemetry.metrics import CallbackOptions, Observation

from ._compat import meter_provider_unset
from .spi.driver import JobDriver
from .spi.records import JOB_STATES, JobRequest, JobTypeStats

if TYPE_CHECKING:
    from .spi.records import OutboxEntry

__all__ = [
    "SAMPLE_INTERVAL_S",
    "record_enqueued",
    "record_enqueued_batch",
    "record_execution",
    "record_published",
    "record_published_batch",
    "record_audit",
    "watch_outbox",
    "watch_queue",
]

SAMPLE_INTERVAL_S = 5.0
_DEPTH_STATES = ("due", "scheduled", "active", "completed", "failed", "cancelled")

_meter = metrics.get_meter("neverlost")
_executions = _meter.create_counter(
    "jobs.executions", unit="{execution}", description="Attempts settled, by type and outcome"
)
_duration = _meter.create_histogram(
    "jobs.duration", unit="ms", description="How long each attempt ran, by type and outcome"
)
_lease_lost = _meter.create_counter(
    "jobs.lease.lost", unit="{execution}", description="Attempts whose lease another took over"
)
_enqueued = _meter.create_counter(
    "jobs.enqueued", unit="{job}", description="Jobs stored (not those dropped for their key)"
)
_published = _meter.create_counter(
    "outbox.published", unit="{entry}", description="Outbox entries handed over and marked"
)

T = TypeVar("T")
_PROVIDER_FROM_ENV = OTEL_PYTHON_METER_PROVIDER in os.environ
_metering = False


def metering() -> bool:
    """Whether a meter provider is set (one set after import included: the API then gives the
    instruments above real ones). Until then the answer is the API module's global, an
    attribute read (``_compat.meter_provider_unset``): the instruments' no-op calls and their
    attribute dicts cost about 1 us a job. Should that private global go in a later API
    version, every call records."""
    global _metering
    if not _metering:
        _metering = not meter_provider_unset() or _PROVIDER_FROM_ENV
    return _metering


def record_execution(job_type: str, outcome: str, duration_ms: float) -> None:
    """One settled attempt."""
    if not metering():
        return
    attributes = {"job.type": job_type, "job.outcome": outcome}
    _executions.add(1, attributes)
    _duration.record(duration_ms, attributes)
    if outcome == "lease_lost":
        _lease_lost.add(1, {"job.type": job_type})


def record_enqueued(job_type: str, stored: int = 1) -> None:
    if stored and metering():
        _enqueued.add(stored, {"job.type": job_type})


def record_published(entry_type: str, count: int = 1) -> None:
    if count and metering():
        _published.add(count, {"outbox.entry.type": entry_type})


def record_published_batch(entries: Sequence[OutboxEntry], marked: Collection[str]) -> None:
    if not metering():
        return
    for entry_type, count in Counter(e.type for e in entries if e.id in marked).items():
        record_published(entry_type, count)


def record_enqueued_batch(requests: Sequence[JobRequest], ids: Sequence[str | None]) -> None:
    if not metering():
        return
    stored = Counter(r.type for r, job_id in zip(requests, ids, strict=True) if job_id is not None)
    for job_type, count in stored.items():
        record_enqueued(job_type, count)


class _Sample(Generic[T]):
    """The last reading of an async source, refreshed on ``loop`` when a collection finds it
    older than ``SAMPLE_INTERVAL_S``. Collections may come from any thread."""

    def __init__(self, read: Callable[[], Awaitable[T]], name: str) -> None:
        self.read = read
        self.name = name
        self.loop = asyncio.get_running_loop()
        self.value: T | None = None
        self.watchers = 0
        self._read_at = -SAMPLE_INTERVAL_S
        self._reading = False

    def latest(self) -> T | None:
        now = time.monotonic()
        if not self._reading and now - self._read_at >= SAMPLE_INTERVAL_S:
            self._reading = True
            self._read_at = now
            refresh = self._refresh()
            try:
                asyncio.run_coroutine_threadsafe(refresh, self.loop)
            except RuntimeError:  # the loop closed meanwhile: keep the last value
                refresh.close()
                self._reading = False
        return self.value

    async def _refresh(self) -> None:
        try:
            self.value = await self.read()
        except Exception as exc:
            logger.debug(
                "reading {} for a metric failed: {}: {}", self.name, type(exc).__name__, exc
            )
        finally:
            self._reading = False


Depth = dict[str, JobTypeStats] | dict[str, int]
_queues: dict[int, _Sample[Depth]] = {}
_outboxes: dict[int, tuple[str, _Sample[int]]] = {}


def watch_queue(driver: JobDriver) -> Callable[[], None]:
    """Report ``driver``'s queue depth while a runner works on it; the call that stops it.

    Call from inside the event loop the driver runs on.
    """
    key = id(driver)
    if key not in _queues:
        _queues[key] = _Sample(lambda: _read_depth(driver), f"the queue depth of {driver!r}")
    return _watching(_queues, key, _queues[key])


def watch_outbox(store: Any) -> Callable[[], None]:
    """Report ``store``'s lag while a relay runs on it, if it can tell (an
    ``oldest_unpublished_age_ms()`` method); the call that stops it."""
    read = getattr(store, "oldest_unpublished_age_ms", None)
    if read is None:
        return lambda: None
    key = id(store)
    if key not in _outboxes:

        async def lag() -> int:
            return int(await read() or 0)

        name = str(getattr(store, "table_name", type(store).__name__))
        _outboxes[key] = (name, _Sample(lag, f"the outbox lag of {store!r}"))
    return _watching(_outboxes, key, _outboxes[key][1])


def _watching(watched: dict[int, Any], key: int, sample: _Sample[Any]) -> Callable[[], None]:
    """Count one more watcher of ``sample``; the call (idempotent) that counts it off, the
    last one removing the source."""
    sample.watchers += 1
    stopped = False

    def stop() -> None:
        nonlocal stopped
        if stopped:
            return
        stopped = True
        sample.watchers -= 1
        if sample.watchers <= 0:
            watched.pop(key, None)

    return stop


async def _read_depth(driver: JobDriver) -> Depth:
    stats = getattr(driver, "stats", None)
    if stats is not None:
        with contextlib.suppress(NotImplementedError):
            return dict(await stats())
    counts = await driver.counts()  # a driver without the operations SPI
    return {str(state): count for state, count in counts.items()}


def _live(watched: dict[int, Any]) -> list[Any]:
    """The watched sources, dropping any whose event loop has closed (a runner or relay that
    was never closed, its loop gone): nothing could read them any more."""
    for key, source in list(watched.items()):
        sample = source[1] if isinstance(source, tuple) else source
        if sample.loop.is_closed():
            watched.pop(key, None)
    return list(watched.values())


def _observe_depth(options: CallbackOptions) -> Iterable[Observation]:
    for sample in _live(_queues):
        latest = sample.latest()
        if not latest:
            continue
        for job_type, stats in latest.items():
            if isinstance(stats, int):  # counts(): per state, no type
                if job_type in JOB_STATES:
                    yield Observation(stats, {"job.state": job_type})
                continue
            for state in _DEPTH_STATES:
                yield Observation(getattr(stats, state), {"job.type": job_type, "job.state": state})


def _observe_oldest_due(options: CallbackOptions) -> Iterable[Observation]:
    for sample in _live(_queues):
        for job_type, stats in (sample.latest() or {}).items():
            if isinstance(stats, JobTypeStats):
                yield Observation(stats.oldest_due_age_ms or 0, {"job.type": job_type})


def _observe_lag(options: CallbackOptions) -> Iterable[Observation]:
    for table, sample in _live(_outboxes):
        lag = sample.latest()
        if lag is not None:
            yield Observation(lag, {"outbox.table": table})


_meter.create_observable_gauge(
    "jobs.queue.depth",
    callbacks=[_observe_depth],
    unit="{job}",
    description="Jobs per type and state, read from the store at most every few seconds",
)
_meter.create_observable_gauge(
    "jobs.queue.oldest_due_age",
    callbacks=[_observe_oldest_due],
    unit="ms",
    description="How long the longest-waiting due job of each type has been due",
)
_meter.create_observable_gauge(
    "outbox.lag",
    callbacks=[_observe_lag],
    unit="ms",
    description="Age of the oldest unpublished outbox entry (0: none)",
)


AUDIT_CHECKS = ("outbox_unpublished", "outbox_job_missing", "due_stuck", "due_no_worker",
                "active_stuck")  # fmt: skip
"""The live loss auditor's checks (``jobs.loss_audit``), as ``audit.check`` names them."""
_audit_passes = _meter.create_counter(
    "neverlost.audit.passes", unit="{pass}", description="Passes of the live loss auditor"
)
_audit_checked = _meter.create_counter(
    "neverlost.audit.entries.checked",
    unit="{entry}",
    description="Published outbox entries whose job the loss auditor looked up",
)
_audit_last: dict[str, int] = {}


def record_audit(result: str, violations: dict[str, int], entries_checked: int) -> None:
    """One pass of the loss auditor: its result (ok, violation, error), what it found per
    check (kept for the gauge; an error pass keeps the last), the entries it looked up."""
    if result != "error":
        _audit_last.clear()
        _audit_last.update({check: violations.get(check, 0) for check in AUDIT_CHECKS})
    if not metering():
        return
    _audit_passes.add(1, {"audit.result": result})
    if entries_checked:
        _audit_checked.add(entries_checked)


def _observe_violations(options: CallbackOptions) -> Iterable[Observation]:
    for check, count in _audit_last.items():
        yield Observation(count, {"audit.check": check})


_meter.create_observable_gauge(
    "neverlost.audit.violations",
    callbacks=[_observe_violations],
    unit="{violation}",
    description="What the live loss auditor's last pass found, per check",
)
