"""Coalescing: calls that arrive while one is in flight go to the store together, next.

The hot path settles one job per call, but a worker at concurrency 10 settles many jobs per
round trip's worth of time. The runner's ``Settler`` coalesces its completes into the driver's
``complete_many``; the SQLite store groups its statements into one commit the same way. A
``Coalescer`` sends the first call at once (no added latency when idle) and gathers the calls
that come in meanwhile into the next send, so under load one call (one round trip, one commit,
one fsync) settles a whole group. Every caller still gets its own outcome, only once its group
has committed.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Hashable, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from .errors import DriverError

__all__ = ["Coalescer"]

Item = TypeVar("Item")
Result = TypeVar("Result")


@dataclass(slots=True)
class _Call(Generic[Item, Result]):
    item: Item
    outcome: asyncio.Future[Result]


class Coalescer(Generic[Item, Result]):
    """Runs ``send(items)`` for groups of submitted items, one group in flight at a time.

    ``send`` returns one outcome per item, in order: a result, or an Exception for that item
    alone; if ``send`` raises, every item of the group gets that error. With ``key``, a group
    never holds two items of one key (a repeat waits for the next group), so a send never sees
    the same job twice. A caller cancelled before its group is sent is left out of it.
    Without ``hold``, a call made while nothing is in flight is sent alone from its caller's
    task (``go_alone``), unless calls came in while the last lone one was in flight: calls then
    overlap the sends (a store's round trips), so the first of them waits for the others made
    in the same step of the event loop (the rest of a claimed batch) and goes with them; a
    group of one with none waiting after it goes back to lone sends. A send that never
    suspends (an in-process store) is never overlapped, so its calls always go alone.
    With ``hold``, each group is formed and sent inside ``async with hold():`` (SQLite's writer
    turn), so what is submitted while the turn is awaited joins that group; if entering
    ``hold`` fails, the group gets that error.
    """

    def __init__(
        self,
        send: Callable[[list[Item]], Awaitable[Sequence[Result | Exception]]],
        *,
        name: str,
        key: Callable[[Item], Hashable] | None = None,
        hold: Callable[[], AbstractAsyncContextManager[Any]] | None = None,
    ) -> None:
        self._send = send
        self._name = name
        self._key = key
        self._hold = hold
        self._queue: list[_Call[Item, Result]] = []
        self._task: asyncio.Task[None] | None = None
        self._direct = False  # a lone call is being sent from its caller's task
        self._overlapped = False  # calls came in while a lone one was in flight

    def go_alone(self) -> bool:
        """Take the turn to send one call from the caller's task, as ``submit`` does: True
        when nothing is in flight or waiting and calls have not been overlapping. The caller
        then makes the call itself (no task, no future), and ``alone_done()`` after it however
        it ended; what is submitted meanwhile waits and goes as the next group."""
        if self._direct or self._overlapped or self._queue or self._hold is not None:
            return False
        task = self._task
        if task is not None and not task.done():
            return False
        self._direct = True
        return True

    def alone_done(self) -> None:
        self._direct = False
        if self._queue:
            self._start()

    async def submit(self, item: Item) -> Result:
        if self._hold is None and self.go_alone():
            try:
                [outcome] = await self._send([item])
            finally:
                self.alone_done()
            if isinstance(outcome, BaseException):
                raise outcome
            return outcome
        call: _Call[Item, Result] = _Call(item, asyncio.get_running_loop().create_future())
        self._queue.append(call)
        if self._direct:
            self._overlapped = True
        elif self._task is None or self._task.done():
            self._start()
        return await call.outcome

    def _start(self) -> None:
        self._task = asyncio.create_task(self._drain(), name=self._name)

    async def close(self) -> None:
        """Wait for the groups already submitted."""
        if self._task is not None:
            await asyncio.gather(self._task, return_exceptions=True)

    async def _drain(self) -> None:
        group: list[_Call[Item, Result]] = []
        try:
            if self._hold is None:
                # One step more: the calls of jobs started in the step that made this task
                # (a slot's next job, started as its last one settles) join the first group.
                await asyncio.sleep(0)
            while self._queue:
                if self._hold is None:
                    group = self._next_group()
                    await self._send_group(group)
                    if len(group) <= 1 and not self._queue:
                        self._overlapped = False  # calls are sparse again: send them alone
                    continue
                try:
                    async with self._hold():
                        # Formed once the turn is ours: what came in while waiting joins.
                        group = self._next_group()
                        await self._send_group(group)
                except Exception as exc:  # waiting for the turn failed: nothing was sent
                    for call in self._next_group():
                        _settle(call, exc)
                group = []
        except BaseException:
            # Never leave a caller waiting for an outcome that will not come.
            stranded, self._queue = [*group, *self._queue], []
            for call in stranded:
                _settle(call, DriverError(f"{self._name} stopped before this ran"))
            raise

    async def _send_group(self, group: list[_Call[Item, Result]]) -> None:
        if not group:
            return
        try:
            outcomes = await self._send([call.item for call in group])
        except Exception as exc:
            outcomes = [exc] * len(group)
        for call, outcome in zip(group, outcomes, strict=True):
            _settle(call, outcome)

    def _next_group(self) -> list[_Call[Item, Result]]:
        live = [call for call in self._queue if not call.outcome.done()]
        if self._key is None:
            self._queue = []
            return live
        group: list[_Call[Item, Result]] = []
        later: list[_Call[Item, Result]] = []
        keys: set[Hashable] = set()
        for call in live:
            key = self._key(call.item)
            (later if key in keys else group).append(call)
            keys.add(key)
        self._queue = later
        return group


def _settle(call: _Call[Item, Result], outcome: Result | BaseException) -> None:
    if call.outcome.done():  # its caller was cancelled meanwhile
        return
    if isinstance(outcome, BaseException):
        call.outcome.set_exception(outcome)
    else:
        call.outcome.set_result(outcome)
