"""Supervised background loops: named tasks that restart after a failure, and say so.

A service (the runner, the relay, the scheduler) runs each of its loops through one
``Supervisor``. The loops handle the failures they expect (a store call that fails is logged
and retried where it happens); anything that escapes a loop is a surprise: the supervisor logs
it with its cause and traceback, marks the loop down (health turns red), waits a backoff and
starts the loop again. ``stop()`` ends the loops it is given, interrupting a loop that waits in
``wait()``; ``close()`` waits for them and logs what ended a loop by an error instead of
swallowing it. The state of each loop is ``LoopHealth``, as ``health()`` reports it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from typing import Any, TypeVar

from loguru import logger

from .failures import describe_cause
from .retry import Backoff, exponential_backoff

__all__ = ["LoopHealth", "Supervisor"]

T = TypeVar("T")

DEFAULT_RESTART_BACKOFF = exponential_backoff(100, 30_000, jitter=0)
_STEADY_S = 60.0
"""A loop that ran this long before failing starts its backoff over."""


@dataclass(frozen=True, slots=True)
class LoopHealth:
    """One supervised loop: ``alive`` unless it is down after a failure (or ended)."""

    alive: bool
    restarts: int
    last_error: str | None


class _Loop:
    __slots__ = (
        "body",
        "down",
        "ended",
        "interrupted",
        "last_error",
        "name",
        "restarts",
        "stopping",
        "streak",
        "task",
        "waiting",
    )

    def __init__(self, name: str, body: Callable[[], Coroutine[Any, Any, None]]) -> None:
        self.name = name
        self.body = body
        self.task: asyncio.Task[None] | None = None
        self.streak = 0
        self.down = False
        self.restarts = 0
        self.last_error: str | None = None
        self.ended: BaseException | None = None
        self.stopping = False
        self.waiting = False
        self.interrupted = False

    @property
    def alive(self) -> bool:
        return self.task is not None and not self.task.done() and not self.down


class Supervisor:
    """Runs the named loops of ``service`` (``"job runner"``) and restarts them on failure."""

    def __init__(self, service: str, *, backoff: Backoff = DEFAULT_RESTART_BACKOFF) -> None:
        self.service = service
        self.backoff = backoff
        self._loops: dict[str, _Loop] = {}
        self._ending: dict[asyncio.Task[None], _Loop] = {}  # replaced while still ending
        self._by_task: dict[asyncio.Task[None], _Loop] = {}  # whose wait() is whose: one look

    def spawn(self, name: str, body: Callable[[], Coroutine[Any, Any, None]]) -> None:
        """Start loop ``name`` (``body()`` runs until it returns or ``stop(name)``).

        One loop of a name runs at a time: a loop spawned while its stopped predecessor is
        still ending (``start()`` right after ``stop()``) runs its body once that one ended.
        """
        previous = self._loops.get(name)
        after: asyncio.Task[None] | None = None
        if previous is not None and previous.task is not None and not previous.task.done():
            after = previous.task
            self._ending[after] = previous
            after.add_done_callback(self._forget)
        loop = _Loop(name, body)
        self._loops[name] = loop
        task = loop.task = asyncio.get_running_loop().create_task(
            self._supervise(loop, after), name=f"{self.service}: {name}"
        )
        self._by_task[task] = loop
        task.add_done_callback(self._by_task.pop)

    def running(self, name: str) -> bool:
        """Whether loop ``name`` exists and was not told to stop."""
        loop = self._loops.get(name)
        return loop is not None and not loop.stopping and loop.task is not None

    def stopping(self, name: str | None = None) -> bool:
        """Whether loop ``name`` (by default the calling loop) was told to stop."""
        loop = self._current() if name is None else self._loops.get(name)
        return loop is None or loop.stopping

    def stop(self, *names: str) -> None:
        """Tell the loops (every one when none is named) to end; interrupt their waits."""
        for loop in self._selected(names):
            loop.stopping = True
            if loop.waiting and loop.task is not None and not loop.interrupted:
                loop.interrupted = True
                loop.task.cancel()

    def wait(self, awaitable: Awaitable[T]) -> Coroutine[Any, Any, T | None]:
        """Await ``awaitable`` in a loop, unless ``stop()`` interrupts it (then None).

        Not a coroutine itself: the one it returns is awaited in its place, one frame less for
        every wake-up of the loop to go through."""
        return self._wait_in(self._current(), awaitable)

    async def close(self, *names: str, timeout_s: float | None = None) -> None:
        """Stop the loops, wait for them (cancel past ``timeout_s``), log what ended one."""
        self.stop(*names)
        loops = self._selected(names)
        tasks = [loop.task for loop in loops if loop.task is not None] + list(self._ending)
        if tasks:
            _, late = await asyncio.wait(tasks, timeout=timeout_s)
            for task in late:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        for loop in loops:
            if loop.ended is not None:
                logger.opt(exception=loop.ended).error(
                    "{}: the {} loop ended by an error: {}",
                    self.service,
                    loop.name,
                    describe_cause(loop.ended),
                )

    def health(self) -> dict[str, LoopHealth]:
        return {
            name: LoopHealth(loop.alive, loop.restarts, loop.last_error)
            for name, loop in self._loops.items()
        }

    def down(self) -> list[str]:
        """The loops that are not alive, each with why."""
        reasons = []
        for name, loop in self._loops.items():
            if not loop.alive and not loop.stopping:
                cause = f": {loop.last_error}" if loop.last_error else ""
                reasons.append(f"the {name} loop is down{cause}")
        return reasons

    async def _supervise(self, loop: _Loop, after: asyncio.Task[None] | None) -> None:
        if after is not None:
            await self._wait_in(loop, asyncio.wait([after]))
        while True:
            if loop.stopping:
                return
            started = time.monotonic()
            try:
                await loop.body()
                return
            except asyncio.CancelledError:
                if loop.interrupted:
                    return
                raise
            except Exception as exc:
                if time.monotonic() - started > _STEADY_S:
                    loop.streak = 0
                loop.streak += 1
                loop.down = True
                loop.last_error = describe_cause(exc)
                if loop.stopping:
                    loop.ended = exc
                    return
                delay_ms = self.backoff(loop.streak)
                logger.opt(exception=exc).error(
                    "{}: the {} loop failed: {}; restarting it in {} ms",
                    self.service,
                    loop.name,
                    loop.last_error,
                    delay_ms,
                )
            await self._wait_in(loop, asyncio.sleep(delay_ms / 1000))
            if loop.stopping:
                return
            loop.restarts += 1
            loop.down = False
            logger.info("{}: the {} loop restarted", self.service, loop.name)

    @staticmethod
    async def _wait_in(loop: _Loop, awaitable: Awaitable[T]) -> T | None:
        if loop.stopping:
            if asyncio.iscoroutine(awaitable):
                awaitable.close()
            return None
        loop.waiting = True
        try:
            return await awaitable
        except asyncio.CancelledError:
            if not loop.interrupted:
                raise
            task = asyncio.current_task()
            if task is not None:
                task.uncancel()
            return None
        finally:
            loop.waiting = False

    def _forget(self, task: asyncio.Task[None]) -> None:
        self._ending.pop(task, None)

    def _current(self) -> _Loop:
        task = asyncio.current_task()
        loop = None if task is None else self._by_task.get(task)
        if loop is None:
            raise RuntimeError(f"{self.service}: wait() called outside its supervised loops")
        return loop

    def _selected(self, names: tuple[str, ...]) -> list[_Loop]:
        if not names:
            return list(self._loops.values())
        return [self._loops[name] for name in names if name in self._loops]
