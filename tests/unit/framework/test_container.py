from __future__ import annotations

from typing import Any

import pytest

from framework import (
    ApplicationBuilder,
    ApplicationContext,
    BeanCreationError,
    BeanDefinitionError,
    BeanNotFoundError,
    CircularDependencyError,
    ContextClosedError,
    DuplicateBeanError,
    MissingDependencyError,
    Token,
    auto_configuration,
    configuration,
    entry,
)


class Greeter:
    def __init__(self, greeting: str) -> None:
        self.greeting = greeting


GREETER: Token[Greeter] = Token("greeter")


async def test_entry_named_after_method_and_token() -> None:
    @configuration
    class Config:
        @entry()
        def greeting(self) -> str:
            return "hello"

        @entry(GREETER)
        def make_greeter(self, greeting: str) -> Greeter:
            return Greeter(greeting)

    context = await ApplicationBuilder([Config]).run()
    greeter = context.get_value(GREETER)
    assert greeter.greeting == "hello"
    assert context.get_value("greeting") == "hello"
    assert context.get_value("greeter") is greeter
    await context.close()


async def test_beans_are_singletons_in_a_dependency_injector_container() -> None:
    calls: list[str] = []

    @configuration
    class Config:
        @entry()
        def shared(self) -> object:
            calls.append("shared")
            return object()

        @entry()
        def first(self, shared: object) -> tuple[str, object]:
            return ("first", shared)

        @entry()
        def second(self, shared: object) -> tuple[str, object]:
            return ("second", shared)

    context = await ApplicationBuilder([Config]).run()
    assert calls == ["shared"]
    assert context.get_value("first")[1] is context.get_value("second")[1]
    assert context.get_value("shared") is context.get_value("shared")
    from dependency_injector import providers

    assert isinstance(context._container.providers["shared"], providers.Singleton)  # type: ignore[union-attr]
    await context.close()


async def test_parameter_named_context_receives_the_application_context() -> None:
    @configuration
    class Config:
        @entry()
        def holder(self, context: ApplicationContext) -> ApplicationContext:
            return context

    context = await ApplicationBuilder([Config]).run()
    assert context.get_value("holder") is context
    await context.close()


async def test_parameter_with_default_is_optional() -> None:
    @configuration
    class Config:
        @entry()
        def value(self, missing: int = 7) -> int:
            return missing

    context = await ApplicationBuilder([Config]).run()
    assert context.get_value("value") == 7
    await context.close()


async def test_beans_are_created_eagerly_in_dependency_order() -> None:
    created: list[str] = []

    @configuration
    class Config:
        @entry()
        def top(self, middle: str) -> str:
            created.append("top")
            return "top"

        @entry()
        def middle(self, bottom: str) -> str:
            created.append("middle")
            return "middle"

        @entry()
        def bottom(self) -> str:
            created.append("bottom")
            return "bottom"

    context = await ApplicationBuilder([Config]).run()
    assert created == ["bottom", "middle", "top"]
    assert list(context.bean_names) == ["bottom", "middle", "top"]
    await context.close()


@pytest.mark.parametrize("user_first", [True, False])
async def test_user_entry_replaces_auto_configured_default_whatever_the_order(
    user_first: bool,
) -> None:
    @auto_configuration
    class Defaults:
        @entry(GREETER)
        def greeter(self) -> Greeter:
            return Greeter("default")

        @entry()
        def other(self, greeter: Greeter) -> str:
            return greeter.greeting

    @configuration
    class User:
        @entry(GREETER)
        def greeter(self) -> Greeter:
            return Greeter("user")

    order: list[type] = [User, Defaults] if user_first else [Defaults, User]
    context = await ApplicationBuilder(order).run()
    assert context.get_value(GREETER).greeting == "user"
    assert context.get_value("other") == "user"
    await context.close()


async def test_two_user_entries_with_one_name_fail_naming_both() -> None:
    @configuration
    class A:
        @entry(GREETER)
        def one(self) -> Greeter:
            return Greeter("a")

    @configuration
    class B:
        @entry(GREETER)
        def two(self) -> Greeter:
            return Greeter("b")

    with pytest.raises(DuplicateBeanError) as caught:
        await ApplicationBuilder([A, B]).run()
    message = str(caught.value)
    assert "'greeter'" in message
    assert "A.one" in message
    assert "B.two" in message


async def test_unknown_bean_lists_known_names() -> None:
    @configuration
    class Config:
        @entry()
        def alpha(self) -> int:
            return 1

        @entry()
        def beta(self) -> int:
            return 2

    context = await ApplicationBuilder([Config]).run()
    with pytest.raises(BeanNotFoundError) as caught:
        context.get_value("gamma")
    assert str(caught.value) == "no bean named 'gamma'; known beans: alpha, beta"
    assert isinstance(caught.value, LookupError)
    await context.close()


async def test_missing_dependency_names_bean_and_parameter() -> None:
    @configuration
    class Config:
        @entry()
        def service(self, repository: object) -> object:
            return object()

    with pytest.raises(MissingDependencyError) as caught:
        await ApplicationBuilder([Config]).run()
    assert "'service' needs 'repository'" in str(caught.value)


async def test_dependency_cycle_is_shown() -> None:
    @configuration
    class Config:
        @entry()
        def a(self, b: object) -> object:
            return object()

        @entry()
        def b(self, c: object) -> object:
            return object()

        @entry()
        def c(self, a: object) -> object:
            return object()

    with pytest.raises(CircularDependencyError) as caught:
        await ApplicationBuilder([Config]).run()
    assert str(caught.value) == "dependency cycle: a -> b -> c -> a"


def test_entry_on_a_plain_function_is_rejected() -> None:
    with pytest.raises(BeanDefinitionError, match="not a method of a @configuration class"):

        @entry()
        def loose() -> int:
            return 1


async def test_class_with_entries_but_no_configuration_decorator_is_rejected() -> None:
    class Undecorated:
        @entry()
        def thing(self) -> int:
            return 1

    with pytest.raises(BeanDefinitionError, match=r"Undecorated is not a @configuration class"):
        await ApplicationBuilder([Undecorated]).run()


def test_async_entry_is_rejected() -> None:
    with pytest.raises(BeanDefinitionError, match="is async"):

        class Config:
            @entry()
            async def thing(self) -> int:
                return 1


async def test_entry_with_when_bean_applies_only_if_that_bean_exists() -> None:
    @auto_configuration
    class Defaults:
        @entry(when_bean="store")
        def relay(self, store: str) -> str:
            return f"relay for {store}"

    @configuration
    class WithStore:
        @entry()
        def store(self) -> str:
            return "db"

    without = await ApplicationBuilder([Defaults]).run()
    assert "relay" not in without
    await without.close()
    with_store = await ApplicationBuilder([Defaults, WithStore]).run()
    assert with_store.get_value("relay") == "relay for db"
    await with_store.close()


async def test_failing_factory_closes_what_was_created() -> None:
    closed: list[str] = []

    class Resource:
        def __init__(self, name: str) -> None:
            self.name = name

        def close(self) -> None:
            closed.append(self.name)

    @configuration
    class Config:
        @entry()
        def first(self) -> Resource:
            return Resource("first")

        @entry()
        def broken(self, first: Resource) -> Resource:
            raise RuntimeError("no luck")

    with pytest.raises(BeanCreationError, match=r"creating bean 'broken' failed: RuntimeError"):
        await ApplicationBuilder([Config]).run()
    assert closed == ["first"]


async def test_async_with_closes_the_context() -> None:
    closed: list[str] = []

    class Resource:
        async def aclose(self) -> None:
            closed.append("aclose")

        def close(self) -> None:  # pragma: no cover - aclose is preferred
            closed.append("close")

    @configuration
    class Config:
        @entry()
        def resource(self) -> Resource:
            return Resource()

    async with await ApplicationBuilder([Config]).run() as context:
        assert isinstance(context.get_value("resource"), Resource)
    assert closed == ["aclose"]
    assert context.is_closed
    with pytest.raises(ContextClosedError):
        context.get_value("resource")


async def test_beans_of_type() -> None:
    @configuration
    class Config:
        @entry()
        def one(self) -> Greeter:
            return Greeter("1")

        @entry()
        def two(self) -> Greeter:
            return Greeter("2")

        @entry()
        def other(self) -> str:
            return "x"

    context = await ApplicationBuilder([Config]).run()
    assert [g.greeting for g in context.beans_of_type(Greeter)] == ["1", "2"]
    await context.close()


def test_token_name_must_be_identifier() -> None:
    with pytest.raises(ValueError, match="identifier"):
        Token[Any]("not a name")
