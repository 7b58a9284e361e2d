"""Inherited entries, beans replaced on purpose, and suggestions for names close to known ones."""

from __future__ import annotations

import pytest

from framework import (
    ApplicationBuilder,
    BeanDefinitionError,
    BeanNotFoundError,
    DuplicateBeanError,
    MissingDependencyError,
    Token,
    auto_configuration,
    configuration,
    entry,
)

GREETING: Token[str] = Token("greeting")


class Closable:
    def __init__(self) -> None:
        self.closed = False

    def close(self) -> None:
        self.closed = True


@configuration
class Base:
    @entry()
    def greeting(self) -> str:
        return "hello"

    @entry()
    def punctuation(self) -> str:
        return "."

    @entry()
    def sentence(self, greeting: str, punctuation: str) -> str:
        return greeting + punctuation


@configuration
class Other:
    @entry()
    def audience(self) -> str:
        return "world"


async def test_a_subclass_inherits_every_entry_of_its_bases() -> None:
    @configuration
    class Both(Base, Other):
        pass

    async with await ApplicationBuilder([Both]).run() as context:
        assert context.get_value("sentence") == "hello."
        assert context.get_value("audience") == "world"


async def test_a_subclass_overrides_an_entry_by_method_or_by_bean_name() -> None:
    @configuration
    class Loud(Base):
        @entry()
        def greeting(self) -> str:  # same method name
            return "HELLO"

        @entry("punctuation")  # same bean name, another method
        def exclamation(self) -> str:
            return "!"

    @configuration
    class Plain(Base):
        def greeting(self) -> str:  # an undecorated redefinition keeps the base's @entry
            return "hi"

    async with await ApplicationBuilder([Loud]).run() as context:
        assert context.get_value("sentence") == "HELLO!"
    async with await ApplicationBuilder([Plain]).run() as context:
        assert context.get_value("sentence") == "hi."


async def test_undecorated_mixins_contribute_their_entries() -> None:
    class Mixin:
        @entry()
        def audience(self) -> str:
            return "mixin"

    @configuration
    class App(Mixin, Base):
        pass

    async with await ApplicationBuilder([App]).run() as context:
        assert context.get_value("audience") == "mixin"


async def test_an_undecorated_subclass_is_still_not_a_configuration() -> None:
    class NotMarked(Base):
        pass

    with pytest.raises(BeanDefinitionError, match="NotMarked is not a @configuration class"):
        await ApplicationBuilder([NotMarked]).run()


async def test_two_accidental_user_entries_still_fail_naming_both() -> None:
    @configuration
    class Again:
        @entry()
        def greeting(self) -> str:
            return "again"

    with pytest.raises(DuplicateBeanError, match=r"Base\.greeting.*Again\.greeting"):
        await ApplicationBuilder([Base, Again]).run()


async def test_a_configuration_marked_as_overriding_replaces_beans_on_purpose() -> None:
    @configuration(overrides=True)
    class Quiet:
        @entry()
        def greeting(self) -> str:
            return "psst"

    @configuration(overrides=True)
    class Later:
        @entry()
        def punctuation(self) -> str:
            return "?"

    @configuration(overrides=True)
    class Latest:
        @entry()
        def punctuation(self) -> str:
            return "…"

    for order in ([Quiet, Base, Later, Latest], [Later, Quiet, Latest, Base]):
        async with await ApplicationBuilder(order).run() as context:
            assert context.get_value("sentence") == "psst…"


async def test_builder_override_replaces_any_bean_and_leaves_the_builder_unchanged() -> None:
    @auto_configuration
    class Defaults:
        @entry()
        def resource(self) -> Closable:
            return Closable()

        @entry()
        def greeting_length(self, greeting: str) -> int:
            return len(greeting)

    @configuration
    class Doubles:
        @entry()
        def greeting(self) -> str:
            return "howdy"

    given = Closable()
    base = ApplicationBuilder([Defaults, Base])
    builder = base.override(Doubles).override("resource", given).override(GREETING, "yo")
    async with await builder.run() as context:
        assert context.get_value("resource") is given
        assert context.get_value(GREETING) == "yo"  # the later override wins
        assert context.get_value("greeting_length") == 2
    assert given.closed  # closed with the context like any bean
    async with await base.run() as context:
        assert context.get_value("sentence") == "hello."
        assert context.get_value("resource") is not given


async def test_overriding_a_bean_no_entry_defines_suggests_the_close_one() -> None:
    builder = ApplicationBuilder([Base]).override("greetng", "hi")
    with pytest.raises(BeanNotFoundError, match="'greetng' \\(did you mean 'greeting'\\?\\)"):
        await builder.run()
    with pytest.raises(BeanDefinitionError, match="not a @configuration class"):
        ApplicationBuilder([Base]).override(Closable)
    with pytest.raises(TypeError, match="exactly one bean"):
        ApplicationBuilder([Base]).override("greeting", "a", "b")


async def test_a_bean_asked_by_a_close_name_is_suggested() -> None:
    async with await ApplicationBuilder([Base]).run() as context:
        with pytest.raises(BeanNotFoundError, match=r"no bean named 'sentense' \(did you mean"):
            context.get_value("sentense")
        with pytest.raises(BeanNotFoundError) as far:
            context.get_value("zzz")
        assert "did you mean" not in str(far.value)


async def test_a_missing_dependency_with_a_close_name_is_suggested() -> None:
    @configuration
    class Typo:
        @entry()
        def shout(self, greting: str) -> str:
            return greting.upper()

    with pytest.raises(MissingDependencyError, match=r"'greting'.*did you mean 'greeting'"):
        await ApplicationBuilder([Base, Typo]).run()


@configuration(overrides=True)
class Exclaim:
    @entry()
    def punctuation(self) -> str:
        return "!"


OVERRIDDEN_APP = ApplicationBuilder([Base]).override(Exclaim).override(GREETING, "hey")


async def test_including_puts_configurations_first_and_keeps_the_overrides() -> None:
    @auto_configuration
    class Defaults:
        @entry()
        def audience(self) -> str:
            return "all"

    builder = OVERRIDDEN_APP.including(Defaults, Base)
    assert builder.configurations == (Defaults, Base)
    async with await builder.run() as context:
        assert context.get_value("sentence") == "hey!"
        assert context.get_value("audience") == "all"


async def test_the_cli_keeps_the_overrides_of_a_builder_app() -> None:
    from jobs import JOB_QUEUE
    from jobs.cli.loading import load_builder

    builder = load_builder("tests.unit.framework.test_overrides:OVERRIDDEN_APP")
    async with await builder.run() as context:
        assert context.get_value("sentence") == "hey!"
        assert JOB_QUEUE in context  # JobsAutoConfiguration added
