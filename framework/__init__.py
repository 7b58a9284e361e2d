"""A small dependency-injection container: configurations, entries, tokens and lifecycle phases."""

from loguru import logger as _logger

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

_logger.disable("framework")  # a library's lines are off until the application enables them

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
