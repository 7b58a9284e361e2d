"""``@entry(closes_before=...)``: the close order declared once, beside the bean."""

from __future__ import annotations

import pytest

from framework import ApplicationBuilder, BeanDefinitionError, Token, configuration, entry

CLOSED: list[str] = []


class Closable:
    def __init__(self, name: str) -> None:
        self.name = name

    async def close(self) -> None:
        CLOSED.append(self.name)


STORE: Token[Closable] = Token("store")
RELAY: Token[Closable] = Token("relay")
WORKER: Token[Closable] = Token("worker")


@pytest.fixture(autouse=True)
def _forget() -> None:
    CLOSED.clear()


@configuration
class Made:
    """The worker is made first (it needs nothing), yet is to close before relay and store."""

    @entry(WORKER, closes_before=(RELAY, STORE))
    def worker(self) -> Closable:
        return Closable("worker")

    @entry(STORE)
    def store(self, worker: Closable) -> Closable:
        return Closable("store")

    @entry(RELAY)
    def relay(self, store: Closable) -> Closable:
        return Closable("relay")


async def test_a_bean_closes_before_the_beans_it_names_whatever_the_creation_order() -> None:
    context = await ApplicationBuilder([Made]).run()
    assert list(context.bean_names) == ["worker", "store", "relay"]
    await context.close()
    assert CLOSED == ["worker", "relay", "store"]  # then reverse creation for the rest


async def test_without_a_declaration_beans_close_in_reverse_creation_order() -> None:
    @configuration
    class Plain:
        @entry()
        def first(self) -> Closable:
            return Closable("first")

        @entry()
        def second(self, first: Closable) -> Closable:
            return Closable("second")

    async with await ApplicationBuilder([Plain]).run():
        pass
    assert CLOSED == ["second", "first"]


async def test_an_absent_conditional_bean_is_skipped() -> None:
    @configuration
    class Conditional:
        @entry(WORKER, closes_before=(RELAY,))
        def worker(self) -> Closable:
            return Closable("worker")

        @entry(RELAY, when_bean="outbox")
        def relay(self) -> Closable:
            return Closable("relay")

        @entry()
        def later(self, worker: Closable) -> Closable:
            return Closable("later")

    async with await ApplicationBuilder([Conditional]).run() as context:
        assert RELAY not in context
    assert CLOSED == ["later", "worker"]


async def test_the_order_stays_when_another_entry_replaces_the_declaring_bean() -> None:
    @configuration(overrides=True)
    class Replacement:
        @entry(WORKER)  # declares nothing: the order of the replaced entry still holds
        def worker(self) -> Closable:
            return Closable("my worker")

    async with await ApplicationBuilder([Made]).override(Replacement).run():
        pass
    assert CLOSED == ["my worker", "relay", "store"]


async def test_a_name_no_entry_defines_is_refused_with_a_suggestion() -> None:
    @configuration
    class Typo:
        @entry(closes_before=("stor",))
        def worker(self) -> Closable:
            return Closable("worker")

        @entry()
        def store(self) -> Closable:
            return Closable("store")

    with pytest.raises(BeanDefinitionError, match=r"closes before 'stor'.*did you mean 'store'"):
        await ApplicationBuilder([Typo]).run()
    assert CLOSED == []  # refused before anything was made


async def test_a_cycle_of_close_orders_is_refused_naming_it() -> None:
    @configuration
    class Cycle:
        @entry(closes_before=("b",))
        def a(self) -> Closable:
            return Closable("a")

        @entry(closes_before=("a",))
        def b(self) -> Closable:
            return Closable("b")

    with pytest.raises(BeanDefinitionError, match="close order cycle: a closes before b"):
        await ApplicationBuilder([Cycle]).run()


def test_closes_before_takes_a_collection_not_one_name() -> None:
    with pytest.raises(BeanDefinitionError, match=r"collection of beans, e.g. \('store',\)"):
        entry(closes_before="store")
