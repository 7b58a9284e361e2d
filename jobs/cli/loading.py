"""APP loading: ``module:attr`` naming a @configuration class, a list of them, a builder, or a
``jobs.Worker`` bundle (or a function returning one: no DI container needed)."""

from __future__ import annotations

import importlib
import os
import sys
from typing import Any

from framework import ApplicationBuilder, FrameworkError
from framework.configuration import configuration_spec

from ..autoconfig import JobsAutoConfiguration
from ..worker_bundle import Worker, worker_configuration
from .errors import CliUsageError

APP_FORM = "module:attr (e.g. myapp.jobs:AppConfiguration, or myapp.worker:build -> Worker)"


def load_builder(spec: str) -> ApplicationBuilder:
    """The ApplicationBuilder ``spec`` names, with JobsAutoConfiguration added when absent.

    ``spec`` names a @configuration class, a list of them, an ApplicationBuilder, a ``Worker``,
    or a function called here (no arguments) that returns a ``Worker`` or a builder. The
    current directory is importable, as with ``python -m``. Every way the spec can be wrong
    raises CliUsageError with one line naming what is wrong and the expected form.
    """
    module_name, _, attr = spec.partition(":")
    if not module_name or not attr:
        raise CliUsageError(f"APP {spec!r} is not of the form {APP_FORM}")
    target = _resolve(spec, _import(spec, module_name), attr)
    if _is_factory(target):
        target = _call_factory(spec, target)
    if isinstance(target, Worker):
        return ApplicationBuilder([JobsAutoConfiguration, worker_configuration(target)])
    if isinstance(target, ApplicationBuilder):  # its overrides stay in force
        return target.including(JobsAutoConfiguration)
    return ApplicationBuilder(_with_jobs(_configurations(spec, target)))


def _import(spec: str, module_name: str) -> Any:
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name is not None and module_name.startswith(exc.name):
            raise CliUsageError(
                f"APP {spec!r}: no module named {module_name!r} (run from the directory that "
                "holds it, or install it)"
            ) from None
        raise CliUsageError(
            f"APP {spec!r}: module {module_name!r} failed to import: {exc}"
        ) from None
    except Exception as exc:
        raise CliUsageError(
            f"APP {spec!r}: module {module_name!r} failed to import: {type(exc).__name__}: {exc}"
        ) from None


def _resolve(spec: str, module: Any, attr: str) -> Any:
    target = module
    for part in attr.split("."):
        try:
            target = getattr(target, part)
        except AttributeError:
            raise CliUsageError(
                f"APP {spec!r}: {module.__name__!r} has no attribute {attr!r}"
            ) from None
    return target


def _is_factory(target: Any) -> bool:
    """A plain function (or other non-class callable), not a configuration or a builder."""
    return (
        callable(target)
        and not isinstance(target, type | ApplicationBuilder | Worker | list | tuple)
    )


def _call_factory(spec: str, factory: Any) -> Any:
    try:
        made = factory()
    except CliUsageError:
        raise
    except Exception as exc:
        raise CliUsageError(
            f"APP {spec!r}: calling it failed: {type(exc).__name__}: {' '.join(str(exc).split())}"
        ) from None
    if not isinstance(made, Worker | ApplicationBuilder):
        raise CliUsageError(
            f"APP {spec!r} returned {_kind(made)}, not a jobs.Worker (or an ApplicationBuilder)"
        )
    return made


def _configurations(spec: str, target: Any) -> list[type]:
    if isinstance(target, ApplicationBuilder):
        return list(target.configurations)
    candidates = list(target) if isinstance(target, list | tuple) else [target]
    for candidate in candidates:
        try:
            configuration_spec(candidate)
        except FrameworkError:
            raise CliUsageError(
                f"APP {spec!r} is {_kind(candidate)}, not a @configuration class, a list of "
                "them, an ApplicationBuilder or a jobs.Worker (or a function returning one)"
            ) from None
    if not candidates:
        raise CliUsageError(f"APP {spec!r} is an empty list; list @configuration classes")
    return candidates


def _kind(value: Any) -> str:
    if isinstance(value, type):
        return f"the class {value.__qualname__} (not decorated with @configuration)"
    return f"a {type(value).__name__}"


def _with_jobs(configurations: list[type]) -> list[type]:
    if JobsAutoConfiguration in configurations:
        return configurations
    return [JobsAutoConfiguration, *configurations]
