"""The Coalescer: one group in flight, the calls that come meanwhile sent together next."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Sequence

import pytest

from jobs.coalescing import Coalescer


class Recorder:
    def __init__(self) -> None:
        self.groups: list[list[str]] = []
        self.gate = asyncio.Event()
        self.gate.set()

    async def send(self, items: list[str]) -> Sequence[str | Exception]:
        self.groups.append(items)
        await self.gate.wait()
        return [ValueError(item) if item.startswith("bad") else item.upper() for item in items]


async def test_calls_arriving_during_a_send_go_together_next() -> None:
    recorder = Recorder()
    recorder.gate.clear()
    coalescer = Coalescer(recorder.send, name="test")
    first = asyncio.create_task(coalescer.submit("a"))
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    rest = [asyncio.create_task(coalescer.submit(item)) for item in ("b", "bad", "c")]
    await asyncio.sleep(0)
    recorder.gate.set()
    assert await first == "A"
    assert await rest[0] == "B"
    with pytest.raises(ValueError, match="bad"):
        await rest[1]
    assert await rest[2] == "C"
    assert recorder.groups == [["a"], ["b", "bad", "c"]]


async def test_a_key_is_never_twice_in_one_group() -> None:
    recorder = Recorder()
    coalescer = Coalescer(recorder.send, name="test", key=lambda item: item[0])
    results = await asyncio.gather(*(coalescer.submit(item) for item in ("x1", "x2", "y1")))
    assert results == ["X1", "X2", "Y1"]
    assert all(len({item[0] for item in group}) == len(group) for group in recorder.groups)


async def test_a_failed_send_fails_its_whole_group_only() -> None:
    calls = 0

    async def send(items: list[str]) -> Sequence[str | Exception]:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise ConnectionError("lost")
        return items

    coalescer = Coalescer(send, name="test")
    with pytest.raises(ConnectionError):
        await coalescer.submit("a")
    assert await coalescer.submit("b") == "b"


async def test_a_caller_cancelled_before_its_turn_is_left_out() -> None:
    recorder = Recorder()
    recorder.gate.clear()
    coalescer = Coalescer(recorder.send, name="test")
    first = asyncio.create_task(coalescer.submit("a"))
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    cancelled = asyncio.create_task(coalescer.submit("gone"))
    kept = asyncio.create_task(coalescer.submit("kept"))
    await asyncio.sleep(0)
    cancelled.cancel()
    recorder.gate.set()
    assert (await first, await kept) == ("A", "KEPT")
    assert recorder.groups == [["a"], ["kept"]]
    await coalescer.close()


async def test_with_a_hold_overlapping_calls_stay_grouped_until_two_sparse_groups() -> None:
    """A caller that holds the hold sends alone (as SQLite's lone statements do); once calls
    overlapped it takes two groups of one in a row before lone sends resume, so a pair that
    keeps coming together (a claim and its settles) keeps sharing one commit."""
    recorder = Recorder()

    @contextlib.asynccontextmanager
    async def hold() -> AsyncIterator[None]:
        yield

    coalescer = Coalescer(recorder.send, name="test", hold=hold)
    assert coalescer.go_alone()
    overlapping = asyncio.create_task(coalescer.submit("b"))
    await asyncio.sleep(0)
    coalescer.alone_done()
    assert await overlapping == "B"
    assert not coalescer.go_alone()  # one group of one: still grouped
    assert await coalescer.submit("c") == "C"
    assert coalescer.go_alone()  # two in a row: lone again
    coalescer.alone_done()
    assert recorder.groups == [["b"], ["c"]]
    await coalescer.close()
