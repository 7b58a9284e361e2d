"""Slots (the PostgreSQL backend's bound on statements at once): never more holders than
slots, waiters served in arrival order, and a cancelled waiter neither keeps nor loses a slot."""

from __future__ import annotations

import asyncio

import pytest

from orm_sqlalchemy._database.slots import Slots


async def test_free_slots_are_taken_at_once_and_the_rest_wait_in_order() -> None:
    slots = Slots(2)
    assert slots.try_take()
    assert slots.try_take()
    assert not slots.try_take()
    order: list[int] = []

    async def wait(index: int) -> None:
        await slots.take()
        order.append(index)

    waiters = [asyncio.create_task(wait(index)) for index in range(3)]
    await asyncio.sleep(0)
    assert order == []
    slots.give()
    slots.give()
    await asyncio.sleep(0)
    assert order == [0, 1]
    slots.give()
    await asyncio.gather(*waiters)
    assert order == [0, 1, 2]
    assert slots.free == 0


async def test_a_waiter_cancelled_before_its_turn_is_skipped() -> None:
    slots = Slots(1)
    await slots.take()
    first = asyncio.create_task(slots.take())
    second = asyncio.create_task(slots.take())
    await asyncio.sleep(0)
    first.cancel()
    with pytest.raises(asyncio.CancelledError):
        await first
    slots.give()
    await asyncio.wait_for(second, timeout=1)
    slots.give()
    assert slots.free == 1


async def test_a_waiter_cancelled_as_it_was_handed_a_slot_passes_it_on() -> None:
    slots = Slots(1)
    await slots.take()
    handed = asyncio.create_task(slots.take())
    await asyncio.sleep(0)
    slots.give()  # the slot is handed to the waiter, which is cancelled before it resumes
    handed.cancel()
    with pytest.raises(asyncio.CancelledError):
        await handed
    assert slots.free == 1
    assert slots.try_take()


def test_a_size_below_one_is_refused() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        Slots(0)
