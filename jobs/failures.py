"""Logging a run of failures so that it says why, once.

A loop that calls a store (the runner's claims, the relay's batches, the scheduler's passes)
keeps one ``FailureStreak`` per operation. Each failure logs one line whose headline names the
operation, how many failed in a row, the cause and what happens next::

    claiming jobs failed (3 in a row): StoreUnavailableError: Redis is unavailable: Error 111
    connecting to 127.0.0.1:6391. Connection refused.; retrying in 400 ms

Only the first failure of a run carries the traceback: the next ones would repeat it. So
does only the first of several streaks failing for one cause (one outage fails the claims, the
heartbeats and the scheduler alike: one traceback explains them all for a minute). After
the first few, a line is written at most every ``quiet_ms`` (the count in the next headline
says how many were not), so a loop retrying fast through a long outage stays readable. The
first success after a run logs one line saying the operation recovered, and after how long.
"""

from __future__ import annotations

import time
from typing import Any

from loguru import logger

from .redaction import redact_text

__all__ = ["FailureStreak", "describe_cause"]

_CAUSE_MAX_CHARS = 500
_EXPLAINED_FOR_S = 60.0
_explained: dict[str, float] = {}
"""When each cause (``describe_cause``) was last logged with its traceback."""


def describe_cause(error: BaseException) -> str:
    """``Type: message`` on one line (whitespace collapsed, URLs redacted, cut at a few hundred
    characters); the message of the error that caused it is added when it says something more."""
    text = " ".join(str(error).split())
    cause = error.__cause__
    if cause is not None:
        cause_text = " ".join(str(cause).split())
        if cause_text and cause_text not in text:
            text = f"{text} (caused by {type(cause).__name__}: {cause_text})"
    head = f"{type(error).__name__}: {text}" if text else type(error).__name__
    head = redact_text(head[: _CAUSE_MAX_CHARS * 2])
    return head if len(head) <= _CAUSE_MAX_CHARS else head[: _CAUSE_MAX_CHARS - 3] + "..."


class FailureStreak:
    """The consecutive failures of one operation (``"claiming jobs"``), logged once each.

    ``failed(error, retry_in_ms=...)`` after each failure, ``succeeded()`` after each success
    (cheap while there is no streak). ``extra`` is bound to every line (``job_id=...``).
    """

    def __init__(
        self, operation: str, *, level: str = "ERROR", quiet_ms: int = 10_000, **extra: Any
    ) -> None:
        self.operation = operation
        self.level = level
        self.quiet_ms = quiet_ms
        self.count = 0
        self._logger = logger.bind(**extra) if extra else logger
        self._started = 0.0
        self._last_logged = 0.0
        self._loud_failures = 3

    @property
    def failing(self) -> bool:
        return self.count > 0

    def failed(
        self, error: BaseException, *, retry_in_ms: float | None = None, then: str | None = None
    ) -> int:
        """Count a failure and log it (the traceback only on the first); the count so far.

        The line ends with ``then`` if given, else ``retrying in <retry_in_ms> ms``.
        """
        now = time.monotonic()
        self.count += 1
        if self.count == 1:
            self._started = now
        elif self.count > self._loud_failures and now - self._last_logged < self.quiet_ms / 1000:
            return self.count
        self._last_logged = now
        times = "" if self.count == 1 else f" ({self.count} in a row)"
        cause = describe_cause(error)
        headline = f"{self.operation} failed{times}: {cause}"
        if then is not None:
            headline += f"; {then}"
        elif retry_in_ms is not None:
            headline += f"; retrying in {retry_in_ms:.0f} ms"
        explain = self.count == 1 and _first_in_a_while(cause, now)
        self._logger.opt(exception=error if explain else None, depth=1).log(
            self.level, "{}", headline
        )
        return self.count

    def succeeded(self) -> None:
        """End a run of failures, logging one line that the operation works again."""
        if not self.count:
            return
        elapsed_s = time.monotonic() - self._started
        self._logger.opt(depth=1).info(
            "{} works again after {} ({:.1f} s)",
            self.operation,
            "1 failure" if self.count == 1 else f"{self.count} failures",
            elapsed_s,
        )
        self.count = 0


def _first_in_a_while(cause: str, now: float) -> bool:
    """Whether ``cause`` was not explained (logged with its traceback) in the last minute."""
    last = _explained.get(cause)
    if last is not None and now - last < _EXPLAINED_FOR_S:
        return False
    if len(_explained) > 1_000:
        _explained.clear()
    _explained[cause] = now
    return True
