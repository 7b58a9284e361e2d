"""Boot a context: entries with dependencies, a typed token, a lifecycle bean, ordered shutdown.

Run: ``python -m examples.framework_basics``
"""

from __future__ import annotations

import asyncio

from framework import ApplicationBuilder, ApplicationContext, Token, configuration, entry


class Clock:
    def __init__(self) -> None:
        self.ticks = 0


class Heartbeat:
    """A lifecycle bean: started at refresh (phase 0), stopped at close."""

    phase = 0
    auto_startup = True

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self._task: asyncio.Task[None] | None = None
        self.five_ticks = asyncio.Event()

    @property
    def is_running(self) -> bool:
        return self._task is not None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._beat(), name="heartbeat")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None

    async def _beat(self) -> None:
        while True:
            self.clock.ticks += 1
            if self.clock.ticks == 5:
                self.five_ticks.set()
            await asyncio.sleep(0.01)


HEARTBEAT: Token[Heartbeat] = Token("heartbeat")


@configuration
class ExampleConfiguration:
    @entry()
    def clock(self) -> Clock:
        return Clock()

    @entry(HEARTBEAT)
    def make_heartbeat(self, clock: Clock) -> Heartbeat:
        return Heartbeat(clock)


async def main() -> int:
    async with await ApplicationBuilder([ExampleConfiguration]).run() as context:
        heartbeat = context.get_value(HEARTBEAT)
        await asyncio.wait_for(heartbeat.five_ticks.wait(), timeout=5)
        describe(context)
    print(f"closed: heartbeat running = {heartbeat.is_running}")
    return 0


def describe(context: ApplicationContext) -> None:
    print(f"beans: {', '.join(context.bean_names)}")
    print(f"heartbeat running = {context.get_value(HEARTBEAT).is_running}, ticks >= 5")


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
