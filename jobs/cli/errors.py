"""The command line's errors: each prints one line, ``Error: ...``, and sets the exit code."""

from __future__ import annotations

import click

from .terminal import terminal_text


class _Error(click.ClickException):
    """Its message may quote stored strings (a job id, a store's error): printed literally."""

    def format_message(self) -> str:
        return terminal_text(self.message, multiline=True)


class CliUsageError(_Error):
    """Bad input: an APP that does not load, a URL of an unknown scheme, a wrong argument."""

    exit_code = 2


class StoreError(_Error):
    """The store could not be reached or refused a call (exit 1)."""

    exit_code = 1


class CommandFailed(_Error):
    """The command ran, and its answer is no (a job not found, not retried, unhealthy)."""

    exit_code = 1
