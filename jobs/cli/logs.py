"""Logging of the worker process: loguru to stderr, as text or one JSON object a line."""

from __future__ import annotations

import sys

from loguru import logger

LEVELS = ("TRACE", "DEBUG", "INFO", "SUCCESS", "WARNING", "ERROR", "CRITICAL")


def configure_logging(level: str, *, json_lines: bool) -> None:
    """Replace loguru's sinks with one on stderr (``serialize`` for ``--log-json``).

    Tracebacks without loguru's variable dumps (``diagnose``), as loguru advises in
    production: they would print payloads and connection strings, and make one store failure
    dozens of lines longer.
    """
    logger.remove()
    logger.add(
        sys.stderr, level=level.upper(), serialize=json_lines, backtrace=False, diagnose=False
    )
