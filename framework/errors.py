"""Errors of the framework package.

FrameworkError
 +-- BeanDefinitionError        an entry or configuration that cannot be used as written
 |    +-- DuplicateBeanError    two user entries (or two auto-configuration entries) share a name
 +-- BeanNotFoundError          a name asked of the context that no entry defines (also LookupError)
 +-- MissingDependencyError     an entry parameter that names no bean
 +-- CircularDependencyError    entries that need each other, directly or through others
 +-- BeanCreationError          an entry method raised while making its bean
 +-- LifecycleError             a lifecycle bean failed to start
 +-- BeanCloseError             one or more beans failed to stop or close (all were still tried)
 +-- ContextClosedError         the context was used after close()
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence


def suggestion(name: str, known: Sequence[str]) -> str:
    """`` (did you mean 'x'?)`` for the known name closest to ``name``, or nothing."""
    close = difflib.get_close_matches(name, list(known), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


class FrameworkError(Exception):
    """Root of every error the framework raises."""


class BeanDefinitionError(FrameworkError):
    """An entry or a configuration class cannot be used as written."""


class DuplicateBeanError(BeanDefinitionError):
    """Two entries of the same standing define one bean name."""

    def __init__(self, name: str, first: str, second: str) -> None:
        self.name = name
        self.definitions = (first, second)
        super().__init__(f"bean {name!r} is defined twice: by {first} and by {second}")


class BeanNotFoundError(FrameworkError, LookupError):
    """The context has no bean of that name; the message suggests the closest known one."""

    def __init__(self, name: str, known: Sequence[str], *, what: str = "no bean named") -> None:
        self.name = name
        self.known = tuple(known)
        listed = ", ".join(sorted(known)) or "(none)"
        super().__init__(f"{what} {name!r}{suggestion(name, known)}; known beans: {listed}")


class MissingDependencyError(FrameworkError):
    """An entry method asks for a bean that no entry defines."""

    def __init__(self, bean: str, parameter: str, known: Sequence[str]) -> None:
        self.bean = bean
        self.parameter = parameter
        listed = ", ".join(sorted(known)) or "(none)"
        super().__init__(
            f"bean {bean!r} needs {parameter!r}, which no entry defines"
            f"{suggestion(parameter, known)}; known beans: {listed}"
        )


class CircularDependencyError(FrameworkError):
    """Entries that depend on each other in a cycle."""

    def __init__(self, cycle: Sequence[str]) -> None:
        self.cycle = tuple(cycle)
        super().__init__("dependency cycle: " + " -> ".join(cycle))


class BeanCreationError(FrameworkError):
    """An entry method raised while making its bean."""

    def __init__(self, bean: str, cause: BaseException) -> None:
        self.bean = bean
        super().__init__(f"creating bean {bean!r} failed: {type(cause).__name__}: {cause}")


class LifecycleError(FrameworkError):
    """A lifecycle bean failed to start."""

    def __init__(self, bean: str, cause: BaseException) -> None:
        self.bean = bean
        super().__init__(f"starting bean {bean!r} failed: {type(cause).__name__}: {cause}")


class BeanCloseError(FrameworkError):
    """One or more beans failed to stop or close; every other bean was still stopped and closed."""

    def __init__(self, failures: Sequence[tuple[str, BaseException]]) -> None:
        self.failures = tuple(failures)
        details = "; ".join(f"{name}: {type(exc).__name__}: {exc}" for name, exc in failures)
        super().__init__(f"{len(failures)} bean(s) failed to stop or close: {details}")


class ContextClosedError(FrameworkError):
    """The context was used after it was closed."""
