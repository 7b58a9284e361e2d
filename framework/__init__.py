"""A small dependency-injection container: configurations, entries, tokens and lifecycle phases."""

from .builder import ApplicationBuilder, start_lifecycles
from .configuration import auto_configuration, configuration, entry
from .context import ApplicationContext
from .errors import (
    BeanCloseError,
    BeanCreationError,
    BeanDefinitionError,
    BeanNotFoundError,
    CircularDependencyError,
    ContextClosedError,
    DuplicateBeanError,
    FrameworkError,
    LifecycleError,
    MissingDependencyError,
)
from .lifecycle import Lifecycle
from .tokens import Token

__all__ = [
    "ApplicationBuilder",
    "start_lifecycles",
    "ApplicationContext",
    "Lifecycle",
    "Token",
    "auto_configuration",
    "configuration",
    "entry",
    "BeanCreationError",
    "BeanDefinitionError",
    "BeanNotFoundError",
    "CircularDependencyError",
    "BeanCloseError",
    "ContextClosedError",
    "DuplicateBeanError",
    "FrameworkError",
    "LifecycleError",
    "MissingDependencyError",
]
