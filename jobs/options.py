"""The checks of a job's options: one place for every way a job is made.

``JobQueue`` (``enqueue``, ``enqueue_many``, ``NewJob``, and so the scheduler and the relay), an
outbox store's ``append``, ``@job_handler`` and ``define_job`` at decoration, and
``JobsSettings`` run these checks, before any I/O. A value that fails raises
``JobOptionError`` (a ``ValueError``) naming the option, the value and the range.

The numbers are ``int``: not ``bool`` (``True`` is not 1 attempt), not ``float`` even when
integral (``5.0`` is refused: a float option is most often a unit mistake, seconds for
milliseconds, and NaN and infinities are floats). An ``int`` subclass (an ``IntEnum``) is
taken as its value. The ranges keep every value exact in every store (SQL ``INTEGER`` and
``BIGINT``, Redis's double-precision scores and Lua numbers) and sane:

=============== ======================================================================
option          range
=============== ======================================================================
delay_ms        0 to ``MAX_DELAY_MS`` (10 years)
run_at          an aware ``datetime`` from 1970-01-01 to 2500-01-01 UTC (exclusive)
timeout_ms      1 to ``MAX_TIMEOUT_MS`` (7 days)
max_attempts    1 to ``MAX_ATTEMPTS``
max_stalls      0 to ``MAX_STALLS`` (0: the first expired lease fails the job)
priority        ``MIN_PRIORITY`` to ``MAX_PRIORITY`` (higher runs first; default 0)
=============== ======================================================================

Queues and limits (issue 30): ``check_queue``
takes a queue name (``DEFAULT_QUEUE`` unless given): 1 to ``MAX_QUEUE_LENGTH`` characters of
letters, digits and ``_ - . :``, so that it can name store keys as it is (no Redis hash-tag
braces, no spaces, no NUL). ``parse_queues`` reads a worker's ``--queues`` list (strict order,
or weights ``critical=3,default=1``); ``parse_rate_limit`` a ``rate_limit`` (``"N/s"``,
``"N/m"``, ``"N/h"``); ``check_concurrency`` a ``concurrency`` or ``global_concurrency``.
The priority range is narrow on purpose: a store may fold it into one sortable number with the
due time (Redis scores are doubles, exact below 2**53; ``run_at`` needs 44 bits).

``check_request`` is the drivers' second line: the same rules over a ``JobRequest`` that
reached a driver without the queue (a driver's own batch API, a test).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from .clock import epoch_ms_of
from .errors import DriverError, JobOptionError

if TYPE_CHECKING:
    from collections.abc import Sequence

    from .spi.records import JobRequest, WorkflowJob

__all__ = [
    "check_workflow_jobs",
    "DEFAULT_QUEUE",
    "MAX_CONCURRENCY",
    "MAX_PRIORITY",
    "MAX_QUEUE_LENGTH",
    "MAX_RATE_COUNT",
    "MIN_PRIORITY",
    "MAX_ATTEMPTS",
    "MAX_DELAY_MS",
    "MAX_RUN_AT_MS",
    "MAX_STALLS",
    "MAX_TIMEOUT_MS",
    "check_delay_ms",
    "check_max_attempts",
    "check_concurrency",
    "check_max_stalls",
    "check_priority",
    "check_queue",
    "check_request",
    "parse_queues",
    "parse_rate_limit",
    "QueueWeights",
    "RateLimit",
    "check_run_at",
    "check_timeout_ms",
]

DAY_MS = 86_400_000
MAX_DELAY_MS = 3_650 * DAY_MS
"""10 years (3,650 days) in milliseconds: the longest ``delay_ms``."""
MAX_TIMEOUT_MS = 7 * DAY_MS
"""A week: the longest ``timeout_ms`` of a job or a handler."""
MAX_ATTEMPTS = 10_000
"""The most ``max_attempts`` one can ask for (an operator's retry may add one more each time)."""
MAX_STALLS = 10_000
"""The most ``max_stalls`` one can ask for."""
MAX_RUN_AT_MS = 16_725_225_600_000
"""2500-01-01T00:00:00Z in epoch milliseconds: ``run_at`` is before it."""
_MAX_RUN_AT = "2500-01-01T00:00:00Z"
MIN_PRIORITY = -100
"""The lowest ``priority`` a job can have (lower runs later)."""
MAX_PRIORITY = 100
"""The highest ``priority`` a job can have (higher runs first)."""
DEFAULT_QUEUE = "default"
"""The queue of a job that names none, and the queue a runner serves unless told otherwise."""
MAX_QUEUE_LENGTH = 64
"""The longest queue name, in characters."""
MAX_CONCURRENCY = 100_000
"""The most a ``concurrency`` or ``global_concurrency`` can say."""
MAX_RATE_COUNT = 1_000_000
"""The most starts a ``rate_limit`` can allow in its period."""
_QUEUE_NAME = re.compile(r"[A-Za-z0-9_.:\-]+")
_RATE = re.compile(r" *([0-9]{1,7}) */ *([smh]) *")
_PERIOD_MS = {"s": 1_000, "m": 60_000, "h": 3_600_000}
_UNIT_OF = {ms: unit for unit, ms in _PERIOD_MS.items()}
_SHOWN = 80
"""A refused value is shown up to this many characters."""


def check_delay_ms(value: object, where: str = "") -> int:
    """``value`` as a ``delay_ms``: an int from 0 to 10 years."""
    if type(value) is int and 0 <= value <= MAX_DELAY_MS:
        return value
    return _int_in("delay_ms", value, 0, MAX_DELAY_MS, "10 years", where)


def check_timeout_ms(value: object, where: str = "") -> int:
    """``value`` as a ``timeout_ms``: an int from 1 to 7 days."""
    if type(value) is int and 0 < value <= MAX_TIMEOUT_MS:
        return value
    return _int_in("timeout_ms", value, 1, MAX_TIMEOUT_MS, "7 days", where)


def check_max_attempts(value: object, where: str = "") -> int:
    """``value`` as a ``max_attempts``: an int from 1 to ``MAX_ATTEMPTS``."""
    if type(value) is int and 0 < value <= MAX_ATTEMPTS:
        return value
    return _int_in("max_attempts", value, 1, MAX_ATTEMPTS, "", where)


def check_max_stalls(value: object, where: str = "") -> int:
    """``value`` as a ``max_stalls``: an int from 0 to ``MAX_STALLS``."""
    if type(value) is int and 0 <= value <= MAX_STALLS:
        return value
    return _int_in("max_stalls", value, 0, MAX_STALLS, "", where)


def check_priority(value: object, where: str = "") -> int:
    """``value`` as a ``priority``: an int from ``MIN_PRIORITY`` to ``MAX_PRIORITY``."""
    if type(value) is int and MIN_PRIORITY <= value <= MAX_PRIORITY:
        return value
    return _int_in("priority", value, MIN_PRIORITY, MAX_PRIORITY, "higher runs first", where)


def check_concurrency(value: object, where: str = "", option: str = "concurrency") -> int:
    """``value`` as a ``concurrency`` (or ``global_concurrency``): an int from 1 up."""
    if type(value) is int and 0 < value <= MAX_CONCURRENCY:
        return value
    return _int_in(option, value, 1, MAX_CONCURRENCY, "", where)


def check_queue(value: object, where: str = "") -> str:
    """``value`` as a queue name: 1 to ``MAX_QUEUE_LENGTH`` of letters, digits, ``_ - . :``."""
    if (
        type(value) is str
        and 0 < len(value) <= MAX_QUEUE_LENGTH
        and _QUEUE_NAME.fullmatch(value) is not None
    ):
        return value
    raise JobOptionError(
        f"queue{_of(where)} must be a name of 1 to {MAX_QUEUE_LENGTH} letters, digits and "
        f"'_', '-', '.', ':' (e.g. 'default', 'emails'), got {_shown(value)}",
        option="queue",
        value=value,
    )


@dataclass(frozen=True, slots=True)
class QueueWeights:
    """The queues a runner serves, in order; ``weights`` None: strict order (drain the first
    before the next), else one positive weight per queue (a share of the claims)."""

    names: tuple[str, ...]
    weights: tuple[int, ...] | None = None


def parse_queues(value: object, where: str = "") -> QueueWeights:
    """A runner's queues: ``"critical,default"`` (strict order), ``"critical=3,default=1"``
    (weights: all or none), or a sequence of names. JobOptionError naming ``queues`` if not:
    empty, a name twice, a bad name, a weight not a whole number from 1."""
    parts: list[str]
    if isinstance(value, QueueWeights):
        return value
    if isinstance(value, str):
        parts = [part.strip() for part in value.split(",")]
    elif isinstance(value, (list, tuple)):
        parts = list(value)
    else:
        raise JobOptionError(
            f"queues{_of(where)} must be a comma-separated text or a list of queue names, "
            f"got {_shown(value)}",
            option="queues",
            value=value,
        )
    names: list[str] = []
    weights: list[int] = []
    for part in parts:
        name, weight = part, None
        if isinstance(part, str) and "=" in part:
            name, _, text = part.partition("=")
            name = name.strip()
            digits = text.strip()
            ok = digits.isascii() and digits.isdigit() and len(digits) <= 7
            weight = int(digits) if ok else 0
            if not 0 < weight <= MAX_CONCURRENCY:
                raise JobOptionError(
                    f"queues{_of(where)}: the weight of {name!r} must be a whole number from "
                    f"1 to {MAX_CONCURRENCY:_}, got {text!r}",
                    option="queues",
                    value=value,
                )
        names.append(check_queue(name, where))
        if weight is not None:
            weights.append(weight)
    if not names:
        raise JobOptionError(
            f"queues{_of(where)} must name at least one queue", option="queues", value=value
        )
    if len(set(names)) != len(names):
        raise JobOptionError(
            f"queues{_of(where)} names a queue twice: {', '.join(names)}",
            option="queues",
            value=value,
        )
    if weights and len(weights) != len(names):
        raise JobOptionError(
            f"queues{_of(where)}: give every queue a weight or none ({value!r})",
            option="queues",
            value=value,
        )
    return QueueWeights(tuple(names), tuple(weights) if weights else None)


@dataclass(frozen=True, slots=True)
class RateLimit:
    """At most ``count`` starts in any ``period_ms`` window."""

    count: int
    period_ms: int

    def __str__(self) -> str:
        unit = period_unit(self.period_ms)
        return f"{self.count}/{unit}" if unit else f"{self.count} per {self.period_ms} ms"


def period_unit(period_ms: int) -> str | None:
    """The unit a ``rate_limit`` writes for ``period_ms`` ("s", "m", "h"); None for another."""
    return _UNIT_OF.get(period_ms)


def parse_rate_limit(value: object, where: str = "") -> RateLimit:
    """A ``rate_limit`` such as ``"10/s"``, ``"600/m"`` or ``"5000/h"`` (or a ``RateLimit``)."""
    if isinstance(value, RateLimit):
        return value
    match = _RATE.fullmatch(value) if isinstance(value, str) else None
    if match is None or not 0 < int(match.group(1)) <= MAX_RATE_COUNT:
        raise JobOptionError(
            f"rate_limit{_of(where)} must be 'N/s', 'N/m' or 'N/h' with N from 1 to "
            f"{MAX_RATE_COUNT:_} (e.g. '10/s'), got {_shown(value)}",
            option="rate_limit",
            value=value,
        )
    return RateLimit(int(match.group(1)), _PERIOD_MS[match.group(2)])


def check_run_at(value: object, where: str = "") -> int:
    """``value``, an aware datetime from 1970 to 2500 (UTC), as epoch milliseconds."""
    if not isinstance(value, datetime):
        raise JobOptionError(
            f"run_at{_of(where)} must be a timezone-aware datetime, got {_shown(value)}",
            option="run_at",
            value=value,
        )
    if value.tzinfo is None or value.utcoffset() is None:
        raise JobOptionError(
            f"run_at{_of(where)} must be timezone-aware (a naive datetime names no instant), "
            f"got {value.isoformat()}; give it a tzinfo, e.g. datetime.now(UTC)",
            option="run_at",
            value=value,
        )
    try:
        epoch_ms = epoch_ms_of(value)
    except OverflowError:  # a datetime near datetime.min/max in a far zone
        epoch_ms = -1
    if not 0 <= epoch_ms < MAX_RUN_AT_MS:
        raise JobOptionError(
            f"run_at{_of(where)} must be from 1970-01-01T00:00:00Z to before {_MAX_RUN_AT}, "
            f"got {value.isoformat()}",
            option="run_at",
            value=value,
        )
    return epoch_ms


def check_request(job: JobRequest) -> None:
    """JobOptionError unless ``job``'s numbers keep the rules above (epoch ms for run_at and
    keep_until): the drivers' second line, over a request that did not come through a queue.
    Inline comparisons first (a request's check costs an enqueue ~1% here); the named check
    only for a value that fails them, to raise its error."""
    max_attempts, timeout_ms, delay_ms = job.max_attempts, job.timeout_ms, job.delay_ms
    max_stalls, run_at_ms, keep_until_ms = job.max_stalls, job.run_at_ms, job.keep_until_ms
    priority, queue = job.priority, job.queue
    if not (
        (queue == DEFAULT_QUEUE or _is_queue(queue))
        and type(priority) is int
        and MIN_PRIORITY <= priority <= MAX_PRIORITY
        and type(max_attempts) is int
        and 0 < max_attempts <= MAX_ATTEMPTS
        and type(delay_ms) is int
        and 0 <= delay_ms <= MAX_DELAY_MS
        and type(max_stalls) is int
        and 0 <= max_stalls <= MAX_STALLS
        and (timeout_ms is None or (type(timeout_ms) is int and 0 < timeout_ms <= MAX_TIMEOUT_MS))
        and (run_at_ms is None or (type(run_at_ms) is int and 0 <= run_at_ms < MAX_RUN_AT_MS))
        and (
            keep_until_ms is None
            or (type(keep_until_ms) is int and 0 <= keep_until_ms < MAX_RUN_AT_MS)
        )
    ):
        _refuse_request(job)


def _refuse_request(job: JobRequest) -> None:
    """Raise the JobOptionError of the first of ``job``'s numbers out of its range."""
    where = f"job {job.id}"
    check_max_attempts(job.max_attempts, where)
    check_delay_ms(job.delay_ms, where)
    check_max_stalls(job.max_stalls, where)
    check_priority(job.priority, where)
    check_queue(job.queue, where)
    if job.timeout_ms is not None:
        check_timeout_ms(job.timeout_ms, where)
    for option in ("run_at_ms", "keep_until_ms"):
        value = getattr(job, option)
        if value is not None:
            _int_in(option, value, 0, MAX_RUN_AT_MS - 1, f"before {_MAX_RUN_AT}", where)


def _is_queue(value: object) -> bool:
    return (
        type(value) is str
        and len(value) <= MAX_QUEUE_LENGTH
        and _QUEUE_NAME.fullmatch(value) is not None
    )


def _int_in(option: str, value: object, low: int, high: int, span: str, where: str) -> int:
    """``value`` as an int in [low, high]; JobOptionError naming ``option`` otherwise."""
    if isinstance(value, int) and not isinstance(value, bool) and low <= value <= high:
        return int(value)
    limits = f"from {low:_} to {high:_}" + (f" ({span})" if span else "")
    raise JobOptionError(
        f"{option}{_of(where)} must be an int {limits}, got {_shown(value)}",
        option=option,
        value=value,
    )


def _of(where: str) -> str:
    return f" of {where}" if where else ""


def _shown(value: Any) -> str:
    """The value as a message shows it: its repr (cut short), and its type unless an int."""
    if type(value) is int and value.bit_length() > 128:
        return f"an int of {value.bit_length()} bits"
    try:
        text = repr(value)
    except Exception:  # a repr that raises: the type will do
        text = "<unprintable>"
    if len(text) > _SHOWN:
        text = text[: _SHOWN - 3] + "..."
    if type(value) is int:
        return text
    return f"{text} (a {type(value).__name__})"


def check_workflow_jobs(jobs: Sequence[WorkflowJob]) -> None:
    """A driver's checks of ``enqueue_workflow``'s jobs, before any I/O: JobOptionError
    (``check_request``) for a number out of range; DriverError for a repeated id, a keyed job,
    a parent that is not an earlier job of the call, or a continue edge that is not an edge."""
    seen: set[str] = set()
    for job in jobs:
        request = job.request
        check_request(request)
        if request.id in seen:
            raise DriverError(f"job id {request.id!r} is repeated in the workflow")
        if request.key is not None:
            raise DriverError(f"a workflow's jobs are unkeyed; job {request.id!r} has a key")
        if not seen.issuperset(job.depends_on):
            raise DriverError(f"job {request.id!r} depends on a job not stored before it")
        if not set(job.depends_on).issuperset(job.continue_after):
            raise DriverError(f"job {request.id!r} continues after a job it does not depend on")
        seen.add(request.id)
