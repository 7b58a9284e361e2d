"""Slots: at most ``size`` holders at once, taken without a coroutine while one is free.

``asyncio.Semaphore`` does the same job, but entering and leaving it is three coroutine calls
and a scan of its waiters, every time: ~15,000 instructions per statement on the store's hot
path (callgrind), more than the store's own work. Here a free slot is taken and given back by
plain method calls; only a caller that finds none waits, on a future of its own, in arrival
order, and a slot given back goes straight to the first waiter.
"""

from __future__ import annotations

import asyncio
from collections import deque

__all__ = ["Slots"]


class Slots:
    """``take()``/``try_take()`` a slot, ``give()`` it back (once per taken slot)."""

    def __init__(self, size: int) -> None:
        if size < 1:
            raise ValueError(f"Slots needs a size of at least 1, got {size}")
        self._free = size
        self._waiting: deque[asyncio.Future[None]] = deque()

    @property
    def free(self) -> int:
        return self._free

    def try_take(self) -> bool:
        """Take a slot if one is free and nobody waits for one; whether it was taken."""
        if self._free > 0 and not self._waiting:
            self._free -= 1
            return True
        return False

    async def take(self) -> None:
        """Take a slot, waiting in turn for one to be given back if none is free."""
        if self.try_take():
            return
        waiter = asyncio.get_running_loop().create_future()
        self._waiting.append(waiter)
        try:
            await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():
                self.give()  # handed a slot just as it was cancelled: pass it on
            elif waiter in self._waiting:
                self._waiting.remove(waiter)
            raise

    def give(self) -> None:
        """Give a taken slot back: to the first live waiter, else to the free ones."""
        while self._waiting:
            waiter = self._waiting.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return
        self._free += 1
