from __future__ import annotations

import pytest

from framework import (
    ApplicationBuilder,
    ApplicationContext,
    BeanCloseError,
    ContextClosedError,
    LifecycleError,
    configuration,
    entry,
    start_lifecycles,
)


class Recorder:
    def __init__(self) -> None:
        self.events: list[str] = []


class Service:
    """A lifecycle bean; async start/stop when ``asynchronous``."""

    def __init__(
        self,
        name: str,
        phase: int,
        recorder: Recorder,
        *,
        auto_startup: bool = True,
        fail_start: bool = False,
        fail_close: bool = False,
        asynchronous: bool = False,
    ) -> None:
        self.name = name
        self.phase = phase
        self.auto_startup = auto_startup
        self.recorder = recorder
        self.running = False
        self.fail_start = fail_start
        self.fail_close = fail_close
        self.asynchronous = asynchronous

    @property
    def is_running(self) -> bool:
        return self.running

    def _start(self) -> None:
        if self.fail_start:
            raise RuntimeError(f"{self.name} cannot start")
        self.running = True
        self.recorder.events.append(f"start {self.name}")

    def _stop(self) -> None:
        self.running = False
        self.recorder.events.append(f"stop {self.name}")

    def start(self) -> object:
        if self.asynchronous:

            async def run() -> None:
                self._start()

            return run()
        self._start()
        return None

    def stop(self) -> object:
        if self.asynchronous:

            async def run() -> None:
                self._stop()

            return run()
        self._stop()
        return None

    def close(self) -> None:
        self.recorder.events.append(f"close {self.name}")
        if self.fail_close:
            raise RuntimeError(f"{self.name} cannot close")


@configuration
class PhasedConfig:
    """Beans created in the order runner, registry, relay, manual (each needs the previous)."""

    @entry()
    def recorder(self) -> Recorder:
        return Recorder()

    @entry()
    def runner(self, recorder: Recorder) -> Service:
        return Service("runner", 10, recorder)

    @entry()
    def registry(self, recorder: Recorder, runner: Service) -> Service:
        return Service("registry", 0, recorder)

    @entry()
    def relay(self, recorder: Recorder, registry: Service) -> Service:
        return Service("relay", 20, recorder, asynchronous=True)

    @entry()
    def manual(self, recorder: Recorder, relay: Service) -> Service:
        return Service("manual", 5, recorder, auto_startup=False)


async def test_start_ascending_phase_stop_descending_close_reverse_creation() -> None:
    context = await ApplicationBuilder([PhasedConfig]).run()
    recorder = context.get_value("recorder")
    assert recorder.events == ["start registry", "start runner", "start relay"]
    assert not context.get_value("manual").is_running
    recorder.events.clear()
    await context.close()
    assert recorder.events == [
        "stop relay",
        "stop runner",
        "stop registry",
        "close manual",
        "close relay",
        "close registry",
        "close runner",
    ]


async def test_manually_started_bean_is_stopped_at_close() -> None:
    context = await ApplicationBuilder([PhasedConfig]).run()
    recorder = context.get_value("recorder")
    context.get_value("manual").start()
    recorder.events.clear()
    await context.close()
    assert recorder.events[:4] == ["stop relay", "stop runner", "stop manual", "stop registry"]


async def test_run_without_start_leaves_the_choice_of_lifecycles_to_the_caller() -> None:
    context = await ApplicationBuilder([PhasedConfig]).run(start=False)
    recorder = context.get_value("recorder")
    assert recorder.events == []
    await start_lifecycles(context, lambda name, bean: name in ("manual", "registry"))
    assert recorder.events == ["start registry", "start manual"]
    assert not context.get_value("runner").is_running
    recorder.events.clear()
    await context.close()
    assert recorder.events[:2] == ["stop manual", "stop registry"]


STARTED: list[Recorder] = []


@configuration
class FailingStartConfig:
    @entry()
    def recorder(self) -> Recorder:
        recorder = Recorder()
        STARTED.append(recorder)
        return recorder

    @entry()
    def first(self, recorder: Recorder) -> Service:
        return Service("first", 0, recorder)

    @entry()
    def broken(self, recorder: Recorder, first: Service) -> Service:
        return Service("broken", 5, recorder, fail_start=True)

    @entry()
    def never(self, recorder: Recorder, broken: Service) -> Service:
        return Service("never", 10, recorder)


async def test_failing_start_stops_and_closes_what_was_started() -> None:
    STARTED.clear()
    with pytest.raises(LifecycleError, match=r"starting bean 'broken' failed: RuntimeError"):
        await ApplicationBuilder([FailingStartConfig]).run()
    (recorder,) = STARTED
    assert recorder.events == [
        "start first",
        "stop first",
        "close never",
        "close broken",
        "close first",
    ]


@configuration
class FailingCloseConfig:
    @entry()
    def recorder(self) -> Recorder:
        return Recorder()

    @entry()
    def a(self, recorder: Recorder) -> Service:
        return Service("a", 0, recorder)

    @entry()
    def b(self, recorder: Recorder, a: Service) -> Service:
        return Service("b", 0, recorder, fail_close=True)

    @entry()
    def c(self, recorder: Recorder, b: Service) -> Service:
        return Service("c", 0, recorder, fail_close=True)


async def test_close_continues_past_failures_and_raises_them_together() -> None:
    context = await ApplicationBuilder([FailingCloseConfig]).run()
    recorder = context.get_value("recorder")
    recorder.events.clear()
    with pytest.raises(BeanCloseError) as caught:
        await context.close()
    assert [name for name, _ in caught.value.failures] == ["c", "b"]
    assert "b: RuntimeError: b cannot close" in str(caught.value)
    closes = [e for e in recorder.events if e.startswith("close")]
    assert closes == ["close c", "close b", "close a"]
    await context.close()  # a second close does nothing


async def test_bean_returned_by_two_entries_is_closed_once() -> None:
    closes: list[int] = []

    class Resource:
        def close(self) -> None:
            closes.append(1)

    shared = Resource()

    @configuration
    class Config:
        @entry()
        def one(self) -> Resource:
            return shared

        @entry()
        def two(self) -> Resource:
            return shared

    context = await ApplicationBuilder([Config]).run()
    await context.close()
    assert closes == [1]


async def test_beans_can_be_looked_up_while_others_stop() -> None:
    seen: list[object] = []

    class Drainer:
        phase = 0
        auto_startup = True
        is_running = False

        def __init__(self, context: object) -> None:
            self.context = context

        def start(self) -> None:
            self.is_running = True

        async def stop(self) -> None:
            seen.append(self.context.get_value("helper"))  # type: ignore[attr-defined]
            self.is_running = False

    @configuration
    class Config:
        @entry()
        def helper(self) -> str:
            return "still here"

        @entry()
        def drainer(self, context: ApplicationContext) -> Drainer:
            return Drainer(context)

    context = await ApplicationBuilder([Config]).run()
    await context.close()
    assert seen == ["still here"]
    with pytest.raises(ContextClosedError):
        context.get_value("helper")


async def test_dispose_is_called_for_engines() -> None:
    disposed: list[bool] = []

    class Engine:
        async def dispose(self) -> None:
            disposed.append(True)

    @configuration
    class Config:
        @entry()
        def engine(self) -> Engine:
            return Engine()

    context = await ApplicationBuilder([Config]).run()
    await context.close()
    assert disposed == [True]
