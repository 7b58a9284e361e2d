"""ApplicationBuilder: merges configurations, orders beans by dependency, refreshes a context."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeVar, overload

from dependency_injector import containers, providers

from .configuration import configuration_spec
from .context import ApplicationContext
from .errors import (
    BeanCloseError,
    BeanCreationError,
    BeanDefinitionError,
    BeanNotFoundError,
    CircularDependencyError,
    DuplicateBeanError,
    LifecycleError,
    MissingDependencyError,
    suggestion,
)
from .lifecycle import Lifecycle, call_maybe_async
from .tokens import Token, bean_name

T = TypeVar("T")

CONTEXT_PARAMETER = "context"


Standing = Literal["auto", "user", "override"]
"""How a definition stands against another of the same name: override > user > auto."""


@dataclass(frozen=True, slots=True)
class BeanDefinition:
    """One bean to make: its name, its factory and the beans the factory takes."""

    name: str
    factory: Callable[..., Any]
    origin: str
    standing: Standing
    when_bean: str | None
    parameters: tuple[inspect.Parameter, ...]
    closes_before: tuple[str, ...] = ()


class ApplicationBuilder:
    """Builds an ApplicationContext from ``@configuration`` classes.

    >>> context = await ApplicationBuilder([JobsAutoConfiguration, AppConfiguration]).run()

    Replacing beans on purpose (tests, a deployment's tweaks) goes through ``override``;
    two ordinary entries with one name still fail ``run()`` naming both:

    >>> builder = ApplicationBuilder(configs).override(TestDoubles).override(JOB_DRIVER, driver)
    """

    def __init__(self, configurations: Iterable[type]) -> None:
        self._configurations = tuple(configurations)
        self._overrides: tuple[type, ...] = ()
        self._values: tuple[tuple[str, object], ...] = ()

    @overload
    def override(self, key: Token[T], bean: T, /) -> ApplicationBuilder: ...

    @overload
    def override(self, key: str, bean: object, /) -> ApplicationBuilder: ...

    @overload
    def override(self, *configurations: type) -> ApplicationBuilder: ...

    def override(self, *args: Any) -> ApplicationBuilder:
        """A builder whose given beans replace those of the same name, whatever their standing.

        ``override(Config, ...)`` adds configurations whose entries replace beans of the same
        name (or add new ones), as ``@configuration(overrides=True)`` does; later overrides win
        over earlier ones. ``override(token_or_name, bean)`` replaces one bean by an object
        made elsewhere (closed with the context like any bean); a name no entry defines is an
        error that suggests the closest known one. The builder it is called on is unchanged.
        """
        copy = ApplicationBuilder(self._configurations)
        copy._overrides, copy._values = self._overrides, self._values
        if args and isinstance(args[0], Token | str):
            if len(args) != 2:
                raise TypeError("override(token_or_name, bean) takes exactly one bean")
            copy._values = (*self._values, (bean_name(args[0]), args[1]))
            return copy
        for candidate in args:
            configuration_spec(candidate)  # BeanDefinitionError if it is not a configuration
        copy._overrides = (*self._overrides, *args)
        return copy

    @property
    def configurations(self) -> tuple[type, ...]:
        """The configuration classes, in the order given."""
        return self._configurations

    def including(self, *configurations: type) -> ApplicationBuilder:
        """A builder with ``configurations`` put first, those already given skipped; its
        overrides are this builder's (``override`` stays in force)."""
        missing = tuple(c for c in configurations if c not in self._configurations)
        copy = ApplicationBuilder((*missing, *self._configurations))
        copy._overrides, copy._values = self._overrides, self._values
        return copy

    async def run(self, *, start: bool = True) -> ApplicationContext:
        """Create every bean in dependency order, then start auto-startup lifecycle beans.

        With ``start=False`` no lifecycle bean is started: the caller starts what it needs
        (a command-line tool reading the store, a worker that leaves its scheduler off) with
        ``start_lifecycles``. Whatever fails, nothing leaks: beans already started are stopped
        and beans already created are closed before the error is raised.
        """
        found = self._found()
        definitions = _resolve_conditions(self._merged(found))
        order = _dependency_order(definitions)
        closes_before = _close_order(found, definitions)
        context = ApplicationContext()
        context._close_first(closes_before)
        container = containers.DynamicContainer()
        context._attach(container)
        context_provider = providers.Object(context)
        for name in order:
            definition = definitions[name]
            kwargs = {
                param.name: (
                    context_provider
                    if param.name == CONTEXT_PARAMETER
                    else container.providers[param.name]
                )
                for param in definition.parameters
                if param.name == CONTEXT_PARAMETER or param.name in definitions
            }
            container.set_provider(name, providers.Singleton(definition.factory, **kwargs))
        await _instantiate(context, container, order)
        if start:
            await start_lifecycles(context)
        return context

    def _found(self) -> list[BeanDefinition]:
        """Every entry of every configuration, replaced ones included."""
        return [
            *self._definitions(self._configurations, forced=False),
            *self._definitions(self._overrides, forced=True),
        ]

    def _merged(self, found: Sequence[BeanDefinition]) -> dict[str, BeanDefinition]:
        definitions = _merge(found)
        for name, bean in self._values:
            if name not in definitions:
                raise BeanNotFoundError(
                    name, list(definitions), what="override(...) replaces no bean named"
                )
            definitions[name] = BeanDefinition(
                name=name,
                factory=_constant(bean),
                origin=f"ApplicationBuilder.override({name!r}, ...)",
                standing="override",
                when_bean=None,
                parameters=(),
            )
        return definitions

    @staticmethod
    def _definitions(configurations: Sequence[type], *, forced: bool) -> list[BeanDefinition]:
        found: list[BeanDefinition] = []
        for candidate in configurations:
            spec = configuration_spec(candidate)
            try:
                instance = candidate()
            except Exception as exc:
                raise BeanDefinitionError(
                    f"configuration {candidate.__qualname__} could not be built: {exc}"
                ) from exc
            standing: Standing = (
                "override" if forced or spec.overrides else "auto" if spec.auto else "user"
            )
            for attr, entry_spec in spec.entries:
                factory = getattr(instance, attr)
                found.append(
                    BeanDefinition(
                        name=entry_spec.name or attr,
                        factory=factory,
                        origin=f"{candidate.__qualname__}.{attr}",
                        standing=standing,
                        when_bean=entry_spec.when_bean,
                        parameters=tuple(inspect.signature(factory).parameters.values()),
                        closes_before=entry_spec.closes_before,
                    )
                )
        return found


def _constant(bean: object) -> Callable[[], object]:
    return lambda: bean


def _merge(found: Sequence[BeanDefinition]) -> dict[str, BeanDefinition]:
    """Overrides replace user entries, which replace auto-configured ones, whatever the order.

    Two auto entries or two user entries with one name are an error naming both; of two
    overrides of one name the later wins.
    """
    tables: dict[Standing, dict[str, BeanDefinition]] = {"auto": {}, "user": {}, "override": {}}
    for definition in found:
        table = tables[definition.standing]
        existing = table.get(definition.name)
        if existing is not None and definition.standing != "override":
            raise DuplicateBeanError(definition.name, existing.origin, definition.origin)
        table[definition.name] = definition
    return {**tables["auto"], **tables["user"], **tables["override"]}


def _resolve_conditions(definitions: dict[str, BeanDefinition]) -> dict[str, BeanDefinition]:
    """Drop entries whose ``when_bean`` is absent, until what is left is stable."""
    kept = dict(definitions)
    while True:
        dropped = [
            name
            for name, definition in kept.items()
            if definition.when_bean is not None and definition.when_bean not in kept
        ]
        if not dropped:
            return kept
        for name in dropped:
            del kept[name]


def _close_order(
    found: Sequence[BeanDefinition], present: dict[str, BeanDefinition]
) -> dict[str, set[str]]:
    """Which beans each bean is closed before, from every entry's ``closes_before`` (a replaced
    entry's too), between beans that are present. A name no entry defines is an error, and so
    is a cycle."""
    defined = {definition.name for definition in found}
    before: dict[str, set[str]] = {}
    for definition in found:
        for other in definition.closes_before:
            if other not in defined:
                raise BeanDefinitionError(
                    f"{definition.origin} closes before {other!r}, which no entry defines"
                    f"{suggestion(other, sorted(defined))}"
                )
            if definition.name in present and other in present:
                before.setdefault(definition.name, set()).add(other)
    _check_close_cycle(before)
    return before


def _check_close_cycle(before: dict[str, set[str]]) -> None:
    done: set[str] = set()
    path: list[str] = []

    def visit(name: str) -> None:
        if name in done:
            return
        if name in path:
            cycle = [*path[path.index(name) :], name]
            raise BeanDefinitionError("close order cycle: " + " closes before ".join(cycle))
        path.append(name)
        for other in sorted(before.get(name, ())):
            visit(other)
        path.pop()
        done.add(name)

    for name in sorted(before):
        visit(name)


def _dependencies(definition: BeanDefinition, known: dict[str, BeanDefinition]) -> list[str]:
    needed: list[str] = []
    for param in definition.parameters:
        if param.kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD):
            continue
        if param.name == CONTEXT_PARAMETER:
            continue
        if param.name in known:
            needed.append(param.name)
        elif param.default is inspect.Parameter.empty:
            raise MissingDependencyError(definition.name, param.name, list(known))
    return needed


def _dependency_order(definitions: dict[str, BeanDefinition]) -> list[str]:
    """Definitions ordered so each comes after what it needs; a cycle is reported in full."""
    edges = {name: _dependencies(d, definitions) for name, d in definitions.items()}
    order: list[str] = []
    done: set[str] = set()
    path: list[str] = []

    def visit(name: str) -> None:
        if name in done:
            return
        if name in path:
            raise CircularDependencyError([*path[path.index(name) :], name])
        path.append(name)
        for dependency in edges[name]:
            visit(dependency)
        path.pop()
        done.add(name)
        order.append(name)

    for name in definitions:
        visit(name)
    return order


async def _instantiate(
    context: ApplicationContext, container: containers.DynamicContainer, order: Sequence[str]
) -> None:
    for name in order:
        try:
            bean = container.providers[name]()
        except Exception as exc:
            await _close_quietly(context, exc)
            raise BeanCreationError(name, exc) from exc
        context._record_created(name, bean)


async def start_lifecycles(
    context: ApplicationContext, select: Callable[[str, Lifecycle], bool] | None = None
) -> None:
    """Start lifecycle beans in ascending phase: the auto-startup ones, or those ``select``
    accepts (given the bean's name and the bean). A failure closes the context and raises
    LifecycleError naming the bean."""
    startable = [
        (name, bean)
        for name, bean in context.beans()
        if isinstance(bean, Lifecycle)
        and (bean.auto_startup if select is None else select(name, bean))
    ]
    startable.sort(key=lambda item: item[1].phase)
    for name, bean in startable:
        try:
            await call_maybe_async(bean.start)
        except Exception as exc:
            await _close_quietly(context, exc)
            raise LifecycleError(name, exc) from exc


async def _close_quietly(context: ApplicationContext, cause: BaseException) -> None:
    """Close what was made so far; close failures are attached as notes to the cause."""
    try:
        await context.close()
    except BeanCloseError as close_error:
        cause.add_note(str(close_error))
