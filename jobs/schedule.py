"""Schedules: a cron expression, the job it queues and the maths of when it occurs.

Cron syntax is cronsim's (a maintained parser with Debian cron semantics): five fields,
``minute hour day-of-month month day-of-week`` (``0 3 * * *``: 03:00 every day), or six with a
leading *seconds* field (``*/5 * * * * *``: every five seconds). Note that croniter puts seconds
last; here they come first.

Time zones. Occurrences are computed in the schedule's ``timezone`` (an IANA name, "UTC" by
default) and then handled as absolute instants: run_at and the idempotency key are UTC. Around
daylight-saving changes the rules are Debian cron's, as cronsim implements them:

* A *wall-clock* schedule (five fields whose minute and hour fields both start with a number,
  such as ``30 2 * * *`` or ``0 9 * * 1-5``) names a local time.

  - Spring forward: a local time that does not exist that day (02:30 in Europe/Berlin on the
    last Sunday of March) runs once, at the first valid minute after the gap (03:00 CEST).
  - Fall back: a local time that happens twice (01:30 in America/New_York on the first Sunday
    of November) runs once, at its first instant (01:30 EDT, i.e. 05:30Z).

* Any other schedule (a ``*`` or ``*/n`` in the minute or hour field, e.g. ``*/15 * * * *`` or
  ``0 * * * *``, and every six-field expression) is an interval of real time: it follows the
  instants the local clock shows. In the skipped hour it does not occur; in the repeated hour
  it occurs twice (``0 * * * *`` at 01:00 EDT and again at 01:00 EST, an hour apart, under two
  different UTC keys).

In UTC there is no daylight saving, so none of this applies: prefer UTC unless the job is about
local wall-clock time (a report "at 3 in the morning" for people in Berlin).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, tzinfo
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from cronsim import CronSim, CronSimError

from .definitions import JobDefinition
from .errors import JobTypeError, ScheduleError
from .payload import MAX_KEY_LENGTH, MAX_TYPE_LENGTH, check_name

ISO_FORMAT = "%Y-%m-%dT%H:%M:%SZ"
KEY_SUFFIX_LENGTH = len(":2026-10-16T03:00:00Z")


def occurrence_iso(occurrence_ms: int) -> str:
    """An occurrence as it appears in a key: UTC, to the second (``2026-10-16T03:00:00Z``)."""
    return datetime.fromtimestamp(occurrence_ms // 1000, tz=UTC).strftime(ISO_FORMAT)


def _zone(timezone: str) -> tzinfo:
    if timezone == "UTC":
        return UTC  # cronsim's fast path: no DST handling at all
    return ZoneInfo(timezone)


class Cron:
    """A validated cron expression in a time zone; answers which instants it occurs at.

    Raises ScheduleError naming ``owner`` (a schedule or job type) for an expression or time
    zone that cannot be used, or one that never occurs.
    """

    __slots__ = ("expression", "timezone", "zone")

    def __init__(self, expression: str, timezone: str = "UTC", *, owner: str) -> None:
        if not isinstance(expression, str) or not expression.strip():
            raise ScheduleError(f"schedule {owner!r}: cron must be a non-empty string")
        if not isinstance(timezone, str) or not timezone:
            raise ScheduleError(f"schedule {owner!r}: timezone must be an IANA name like 'UTC'")
        try:
            self.zone = _zone(timezone)
        except (ZoneInfoNotFoundError, ValueError, OSError) as exc:
            raise ScheduleError(
                f"schedule {owner!r}: unknown timezone {timezone!r} ({exc})"
            ) from None
        self.expression = " ".join(expression.split())
        self.timezone = timezone
        if len(self.expression.split()) not in (5, 6):
            raise ScheduleError(
                f"schedule {owner!r}: cron {expression!r} needs 5 fields (minute hour "
                "day-of-month month day-of-week) or 6 with a leading seconds field"
            )
        try:
            CronSim(self.expression, datetime.now(self.zone))
        except CronSimError as exc:
            raise ScheduleError(f"schedule {owner!r}: bad cron {expression!r}: {exc}") from None
        if self.after(_now_ms()) is None:
            raise ScheduleError(f"schedule {owner!r}: cron {expression!r} never occurs")

    def __repr__(self) -> str:
        return f"Cron({self.expression!r}, {self.timezone!r})"

    def after(self, when_ms: int) -> int | None:
        """The first occurrence strictly after ``when_ms`` (epoch ms); None if there is none."""
        return next(self._from(when_ms), None)

    def between(self, start_ms: int, end_ms: int) -> Iterator[int]:
        """Occurrences ``start_ms <= o <= end_ms`` in ascending order, each once."""
        for occurrence in self._from(start_ms - 1):
            if occurrence > end_ms:
                return
            yield occurrence

    def _from(self, when_ms: int) -> Iterator[int]:
        """Occurrences strictly after ``when_ms``, ascending, without repeats.

        cronsim counts wall-clock schedules in naive local time, so started inside a repeated
        (fall-back) hour it may first yield an instant already past: those are skipped here.
        """
        # cronsim drops the milliseconds and starts looking one second later: strictly after.
        start = datetime.fromtimestamp(when_ms // 1000, tz=self.zone)
        last = when_ms
        for moment in CronSim(self.expression, start):
            occurrence = int(moment.timestamp()) * 1000
            if occurrence > last:
                last = occurrence
                yield occurrence


def _now_ms() -> int:
    return int(datetime.now(UTC).timestamp() * 1000)


@dataclass(frozen=True, slots=True, kw_only=True)
class Schedule:
    """Queue ``job`` with ``payload`` at every occurrence of ``cron`` in ``timezone``.

    Declare it as a bean (a Schedule, or a list or tuple of them) or with
    ``@job_handler(type, cron=...)``. ``name`` (default: the job type) prefixes each
    occurrence's idempotency key, ``<name>:2026-10-16T03:00:00Z``; give two schedules of one
    job type different names. A schedule of a job definition with no payload sends ``{}`` (the
    schema's defaults). Invalid values raise ScheduleError naming the schedule.
    """

    cron: str
    job: str | JobDefinition[Any]
    payload: Any = None
    timezone: str = "UTC"
    name: str | None = None
    _cron: Cron = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        job_type = self.job.type if isinstance(self.job, JobDefinition) else self.job
        try:
            check_name("job type", job_type, MAX_TYPE_LENGTH)
            if self.name is not None:
                check_name("schedule name", self.name, MAX_KEY_LENGTH - KEY_SUFFIX_LENGTH)
        except JobTypeError as exc:
            raise ScheduleError(f"schedule {self.name or job_type!r}: {exc}") from None
        object.__setattr__(self, "_cron", Cron(self.cron, self.timezone, owner=self.key_prefix))

    @property
    def job_type(self) -> str:
        return self.job.type if isinstance(self.job, JobDefinition) else self.job

    @property
    def key_prefix(self) -> str:
        """The schedule's name, or its job type when it has none."""
        return self.name if self.name is not None else self.job_type

    @property
    def job_payload(self) -> Any:
        """What is enqueued: the payload, or ``{}`` for a definition given none."""
        if self.payload is None and isinstance(self.job, JobDefinition):
            return {}
        return self.payload

    def key(self, occurrence_ms: int) -> str:
        """The idempotency key of one occurrence: ``<name>:<ISO occurrence in UTC>``."""
        return f"{self.key_prefix}:{occurrence_iso(occurrence_ms)}"

    def next_after(self, when_ms: int) -> int | None:
        """The first occurrence strictly after ``when_ms`` (epoch ms)."""
        return self._cron.after(when_ms)

    def occurrences(self, start_ms: int, end_ms: int) -> Iterator[int]:
        """Occurrences in ``[start_ms, end_ms]``, ascending (epoch ms)."""
        return self._cron.between(start_ms, end_ms)


def check_cron(cron: str, timezone: str | None, owner: str) -> None:
    """Raise ScheduleError naming ``owner`` if ``cron`` in ``timezone`` cannot be used."""
    Cron(cron, timezone or "UTC", owner=owner)
