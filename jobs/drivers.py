"""Stores opened from a URL: the driver is found by the URL's scheme in the ``neverlost.drivers``
entry-point group (``jobs.spi.factories``), so the engine, the CLI and the chaos kit import no
driver, and a third-party driver is found the same way as the built-in ones.
"""

from __future__ import annotations

from functools import cache
from importlib.metadata import EntryPoint, entry_points
from typing import Any

from .errors import JobsError
from .redaction import redact_url
from .spi.driver import JobDriver
from .spi.factories import DRIVERS_GROUP, DriverFactory

__all__ = ["UnknownSchemeError", "factory_for", "known_schemes", "open_driver", "scheme_of"]


class UnknownSchemeError(JobsError, ValueError):
    """No installed package registers a driver for a URL's scheme."""


def scheme_of(url: str) -> str:
    """The URL's scheme, lower case ("" when it has none)."""
    return url.partition("://")[0].lower() if "://" in url else ""


@cache
def _entry_points() -> dict[str, EntryPoint]:
    return {point.name: point for point in entry_points(group=DRIVERS_GROUP)}


def known_schemes() -> tuple[str, ...]:
    """Every scheme a driver is registered for, sorted (nothing is imported)."""
    return tuple(sorted(_entry_points()))


def factory_for(url: str) -> DriverFactory:
    """The factory registered for ``url``'s scheme (loaded: a driver whose extra is missing
    raises its ``MissingExtraError`` here); UnknownSchemeError, one line, otherwise."""
    scheme = scheme_of(url)
    point = _entry_points().get(scheme)
    if point is None:
        shown = f"the unknown scheme {scheme!r}" if scheme else "no scheme"
        raise UnknownSchemeError(
            f"{redact_url(url)!r} has {shown}; known: "
            f"{', '.join(scheme + '://' for scheme in known_schemes())}; "
            "another store needs its driver's package installed (it registers its schemes "
            f"in the {DRIVERS_GROUP} entry points)"
        )
    loaded = _load(point)
    if isinstance(loaded, DriverFactory):
        return loaded
    if callable(loaded):  # a bare factory callable: no drop, no outbox
        return DriverFactory(open_driver=loaded)
    raise JobsError(f"the {DRIVERS_GROUP} entry point {point.name!r} is not a factory: {loaded!r}")


@cache
def _load(point: EntryPoint) -> Any:
    return point.load()


def open_driver(url: str, **options: Any) -> JobDriver:
    """A driver for ``url`` that owns its connection (``options`` as the factory takes them)."""
    return factory_for(url)(url, **options)
