"""The FCALLs ``scripts.ScriptRunner`` sends: one call (``Command`` with a future), a tick's
batch of jobs (``Command`` with ``jobs``, each with its future), a chunk of a bulk call
(``Chunk``); and how a batch function's reply is split into one result per job."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from jobs.errors import DriverError

from .errors import refusal

__all__ = [
    "MAX_BATCH",
    "NO_RESULT",
    "Chunk",
    "Command",
    "Given",
    "Job",
    "Parts",
    "ScriptArg",
    "Sendable",
    "Shared",
    "given",
    "per_job_results",
    "resolve",
]

MAX_BATCH = 200
"""Jobs per batched function call: bounds how long one call keeps Redis busy."""

ScriptArg = str | int | float | bytes
T = TypeVar("T")
Shared = tuple[Sequence[str], Sequence[ScriptArg]]
"""The leading KEYS and ARGV of a batch script call, shared by its jobs."""
Parts = Callable[[T, list[str], list[ScriptArg]], None]
"""Adds a job's KEYS and ARGV to those of its batch call."""


@dataclass(slots=True)
class Job:
    keys: Sequence[str]
    args: Sequence[ScriptArg]
    future: asyncio.Future[Any] = field(repr=False)


@dataclass(slots=True)
class Command:
    """One FCALL: a single call (``future``) or a batch of jobs, each with its own future."""

    function: str
    keys: list[str]
    args: list[ScriptArg]
    durable: bool
    future: asyncio.Future[Any] | None = None
    jobs: list[Job] = field(default_factory=list)

    def fcall(self) -> tuple[Any, ...]:
        keys = self.keys
        return ("FCALL", self.function, len(keys), *keys, *self.args)

    def settle(self, reply: Any) -> None:
        if self.future is not None:
            resolve(self.future, result=reply)
            return
        results = per_job_results(reply, len(self.jobs))
        if isinstance(results, DriverError):
            self.fail(results)
            return
        for job, result in zip(self.jobs, results, strict=True):
            if isinstance(result, BaseException):
                resolve(job.future, error=result)
            else:
                resolve(job.future, result=result)

    def fail(self, error: BaseException) -> None:
        if self.future is not None:
            resolve(self.future, error=error)
        for job in self.jobs:
            resolve(job.future, error=error)


class Chunk(Generic[T]):
    """One FCALL of a ``batch`` call: ``count`` of its jobs from ``first``, whose results go to
    the call's ``results`` at their positions (a refused job's: its RedisScriptError).

    Its arguments are made when it is first sent (``fcall``), so Redis runs the chunk before
    while this one is made: a bulk enqueue's client and server work overlap. No object is made
    per job: its keys and arguments go straight into the chunk's lists (``parts``).
    """

    __slots__ = ("_call", "_count", "_first", "_function", "_jobs", "_parts", "_results",
                 "_shared", "durable")  # fmt: skip

    def __init__(
        self,
        function: str,
        shared: Shared,
        durable: bool,
        batch: tuple[Sequence[T], Parts[T], list[Any]],
        first: int,
        count: int,
    ) -> None:
        self._function = function
        self._shared = shared
        self.durable = durable
        self._jobs, self._parts, self._results = batch
        self._first = first
        self._count = count
        self._call: tuple[Any, ...] | None = None

    def fcall(self) -> tuple[Any, ...]:
        call = self._call
        if call is None:
            shared_keys, shared_args = self._shared
            keys, args = list(shared_keys), list(shared_args)
            parts, jobs, first = self._parts, self._jobs, self._first
            for index in range(first, first + self._count):
                parts(jobs[index], keys, args)
            call = self._call = ("FCALL", self._function, len(keys), *keys, *args)
        return call

    def settle(self, reply: Any) -> None:
        results = per_job_results(reply, self._count)
        if isinstance(results, DriverError):
            self.fail(results)
            return
        self._results[self._first : self._first + self._count] = results

    def fail(self, error: BaseException) -> None:
        self._results[self._first : self._first + self._count] = [error] * self._count


Sendable = Command | Chunk[Any]
NO_RESULT: Any = object()
"""A ``batch`` job's result until its call's reply is in."""



def per_job_results(reply: Any, count: int) -> list[Any] | DriverError:
    """A batch FCALL's reply as one result per job, in place: a refused job's refusal text
    (what ``for_each_job`` returns for it) as its error (``refusal``); a DriverError when the
    reply is not one result for each of the ``count`` jobs."""
    if not isinstance(reply, list) or len(reply) != count:
        return DriverError(f"a batch of {count} jobs got the reply {reply!r}")
    for position, result in enumerate(reply):
        if isinstance(result, bytes | str):
            text = result.decode(errors="replace") if isinstance(result, bytes) else result
            reply[position] = refusal(text)
    return reply


Given = tuple[Sequence[str], Sequence[ScriptArg]]


def given(job: Given, keys: list[str], args: list[ScriptArg]) -> None:
    """``Parts`` of a job given as its (keys, args)."""
    keys += job[0]
    args += job[1]


def resolve(
    future: asyncio.Future[Any], *, result: Any = None, error: BaseException | None = None
) -> None:
    if future.done():
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(result)
