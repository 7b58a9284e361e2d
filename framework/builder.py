"""ApplicationBuilder: merges configurations, orders beans by dependency, refreshes a context."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from dependency_injector import containers, providers

from .configuration import configuration_spec
from .context import ApplicationContext
from .errors import (
    BeanCloseError,
    BeanCreationError,
    BeanDefinitionError,
    CircularDependencyError,
    DuplicateBeanError,
    LifecycleError,
    MissingDependencyError,
)
from .lifecycle import Lifecycle, call_maybe_async

CONTEXT_PARAMETER = "context"


@dataclass(frozen=True, slots=True)
class BeanDefinition:
    """One bean to make: its name, its factory and the beans the factory takes."""

    name: str
    factory: Callable[..., Any]
    origin: str
    auto: bool
    when_bean: str | None
    parameters: tuple[inspect.Parameter, ...]


class ApplicationBuilder:
    """Builds an ApplicationContext from ``@configuration`` classes.

    >>> context = await ApplicationBuilder([JobsAutoConfiguration, AppConfiguration]).run()
    """

    def __init__(self, configurations: Iterable[type]) -> None:
        self._configurations = tuple(configurations)

    @property
    def configurations(self) -> tuple[type, ...]:
        """The configuration classes, in the order given."""
        return self._configurations

    async def run(self, *, start: bool = True) -> ApplicationContext:
        """Create every bean in dependency order, then start auto-startup lifecycle beans.

        With ``start=False`` no lifecycle bean is started: the caller starts what it needs
        (a command-line tool reading the store, a worker that leaves its scheduler off) with
        ``start_lifecycles``. Whatever fails, nothing leaks: beans already started are stopped
        and beans already created are closed before the error is raised.
        """
        definitions = _resolve_conditions(_merge(self._definitions()))
        order = _dependency_order(definitions)
        context = ApplicationContext()
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

    def _definitions(self) -> list[BeanDefinition]:
        found: list[BeanDefinition] = []
        for candidate in self._configurations:
            spec = configuration_spec(candidate)
            try:
                instance = candidate()
            except Exception as exc:
                raise BeanDefinitionError(
                    f"configuration {candidate.__qualname__} could not be built: {exc}"
                ) from exc
            for attr, entry_spec in spec.entries:
                factory = getattr(instance, attr)
                found.append(
                    BeanDefinition(
                        name=entry_spec.name or attr,
                        factory=factory,
                        origin=f"{candidate.__qualname__}.{attr}",
                        auto=spec.auto,
                        when_bean=entry_spec.when_bean,
                        parameters=tuple(inspect.signature(factory).parameters.values()),
                    )
                )
        return found


def _merge(found: Sequence[BeanDefinition]) -> dict[str, BeanDefinition]:
    """User entries replace auto-configured ones of the same name, whatever the order."""
    user: dict[str, BeanDefinition] = {}
    auto: dict[str, BeanDefinition] = {}
    for definition in found:
        table = auto if definition.auto else user
        existing = table.get(definition.name)
        if existing is not None:
            raise DuplicateBeanError(definition.name, existing.origin, definition.origin)
        table[definition.name] = definition
    return {**auto, **user}


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
