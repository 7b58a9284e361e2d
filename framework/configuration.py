"""``@configuration`` classes and their ``@entry`` factory methods."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, TypeVar, overload

from .errors import BeanDefinitionError
from .tokens import Token

F = TypeVar("F", bound=Callable[..., Any])
C = TypeVar("C", bound=type)

_ENTRY_ATTR = "__framework_entry__"
_CONFIG_ATTR = "__framework_configuration__"


@dataclass(frozen=True, slots=True)
class EntrySpec:
    """What ``@entry`` records on a method: the bean name, when the entry applies, and the beans
    it is closed before."""

    name: str | None
    when_bean: str | None
    closes_before: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class ConfigurationSpec:
    """What ``@configuration`` records on a class: its standing and its entries.

    ``auto`` entries are defaults; ``overrides`` ones replace beans of the same name on purpose.
    """

    auto: bool
    entries: tuple[tuple[str, EntrySpec], ...]
    overrides: bool = False


def entry(
    token: Token[Any] | str | None = None,
    *,
    when_bean: Token[Any] | str | None = None,
    closes_before: Iterable[Token[Any] | str] = (),
) -> Callable[[F], F]:
    """Mark a method of a ``@configuration`` class as the factory of one bean.

    The bean is named after the method, or after ``token`` when one is given. The method's
    parameters are resolved from the context by name; a parameter named ``context`` receives the
    ApplicationContext. With ``when_bean``, the entry applies only if a bean of that name is
    defined (the outbox relay exists only where an outbox store does).

    ``closes_before`` names beans this one is closed before when the context closes (a worker
    drains before the relay and the store it uses go), whatever the order the beans were made
    in; a named bean that is absent (its entry's condition failed) is skipped. The order is a
    fact about the beans' names: it stays in force when another entry replaces this bean.
    """
    name = token.name if isinstance(token, Token) else token
    condition = when_bean.name if isinstance(when_bean, Token) else when_bean
    if isinstance(closes_before, Token | str):
        raise BeanDefinitionError(
            f"closes_before takes a collection of beans, e.g. ({closes_before!r},)"
        )
    before = tuple(other.name if isinstance(other, Token) else other for other in closes_before)

    def decorate(method: F) -> F:
        if not inspect.isfunction(method):
            raise BeanDefinitionError(
                f"@entry must decorate a method of a @configuration class, got {method!r}"
            )
        if inspect.iscoroutinefunction(method):
            raise BeanDefinitionError(
                f"entry {method.__qualname__} is async: entry methods are plain factories; "
                "do asynchronous set-up in a lifecycle start()"
            )
        params = list(inspect.signature(method).parameters)
        owner = method.__qualname__.split(".")[-2:-1]
        if not params or params[0] != "self" or owner in ([], ["<locals>"]):
            raise BeanDefinitionError(
                f"entry {method.__qualname__} is not a method of a @configuration class"
            )
        spec = EntrySpec(name=name, when_bean=condition, closes_before=before)
        setattr(method, _ENTRY_ATTR, spec)
        return method

    return decorate


def _collect(cls: type, *, auto: bool, overrides: bool = False) -> ConfigurationSpec:
    """The entries of ``cls`` and of its bases, by attribute name.

    Bases are read from the most distant to ``cls`` itself, so a subclass that redefines an
    entry method replaces it (an undecorated redefinition keeps the base's ``@entry``), and an
    entry of a subclass replaces a base entry that defines the same bean name.
    """
    by_attr: dict[str, EntrySpec] = {}
    for klass in reversed(cls.__mro__):
        for attr, value in vars(klass).items():
            spec = getattr(value, _ENTRY_ATTR, None)
            if isinstance(spec, EntrySpec):
                bean = spec.name or attr
                for other, other_spec in list(by_attr.items()):
                    if other != attr and (other_spec.name or other) == bean:
                        del by_attr[other]
                by_attr[attr] = spec
    return ConfigurationSpec(auto=auto, entries=tuple(by_attr.items()), overrides=overrides)


@overload
def configuration(cls: C, /) -> C: ...


@overload
def configuration(*, overrides: bool = False) -> Callable[[C], C]: ...


def configuration(cls: C | None = None, /, *, overrides: bool = False) -> C | Callable[[C], C]:
    """Mark a class whose ``@entry`` methods define beans. It is built with no arguments.

    Entries of base classes are inherited. ``@configuration(overrides=True)`` marks a
    configuration whose entries replace beans of the same name on purpose (test doubles, a
    deployment's tweaks): without it, two user entries with one name fail ``run()``.
    """

    def decorate(target: C) -> C:
        if not inspect.isclass(target):
            raise BeanDefinitionError(f"@configuration decorates a class, got {target!r}")
        setattr(target, _CONFIG_ATTR, _collect(target, auto=False, overrides=overrides))
        return target

    return decorate if cls is None else decorate(cls)


def auto_configuration(cls: C) -> C:
    """Mark a configuration whose entries are defaults: a user entry of the same name wins."""
    if not inspect.isclass(cls):
        raise BeanDefinitionError(f"@auto_configuration decorates a class, got {cls!r}")
    setattr(cls, _CONFIG_ATTR, _collect(cls, auto=True))
    return cls


def configuration_spec(candidate: object) -> ConfigurationSpec:
    """The spec of a configuration class, or a BeanDefinitionError saying why it is not one."""
    if inspect.isfunction(candidate) and hasattr(candidate, _ENTRY_ATTR):
        raise BeanDefinitionError(
            f"entry {candidate.__qualname__} is not a method of a @configuration class"
        )
    if not inspect.isclass(candidate):
        raise BeanDefinitionError(f"{candidate!r} is not a @configuration class")
    spec = vars(candidate).get(_CONFIG_ATTR)
    if not isinstance(spec, ConfigurationSpec):
        stray = [name for name, value in vars(candidate).items() if hasattr(value, _ENTRY_ATTR)]
        detail = f" (it has @entry methods: {', '.join(stray)})" if stray else ""
        raise BeanDefinitionError(
            f"{candidate.__qualname__} is not a @configuration class{detail}"
        )
    return spec
