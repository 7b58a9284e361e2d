"""Logging of the command line: the library's lines, loguru to stderr, as text or one JSON
object a line."""

from __future__ import annotations

import sys

from loguru import logger

from ..logs import enable_logging

LEVELS = ("TRACE", "DEBUG", "INFO", "SUCCESS", "WARNING", "ERROR", "CRITICAL")


def configure_logging(level: str, *, json_lines: bool) -> None:
    """Show the library's lines (``jobs.enable_logging``, with trace ids) on one stderr
    sink that replaces loguru's (``serialize`` for ``--log-json``).

    Tracebacks without loguru's variable dumps (``diagnose``), as loguru advises in
    production: they would print payloads and connection strings, and make one store failure
    dozens of lines longer.
    """
    enable_logging()
    logger.remove()
    logger.add(
        sys.stderr, level=level.upper(), serialize=json_lines, backtrace=False, diagnose=False
    )
