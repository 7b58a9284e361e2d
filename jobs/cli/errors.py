"""The command line's errors: each prints one line, ``Error: ...``, and sets the exit code."""

from __future__ import annotations

import click


class CliUsageError(click.ClickException):
    """Bad input: an APP that does not load, a URL of an unknown scheme, a wrong argument."""

    exit_code = 2


class StoreError(click.ClickException):
    """The store could not be reached or refused a call (exit 1)."""

    exit_code = 1


class CommandFailed(click.ClickException):
    """The command ran, and its answer is no (a job not found, not retried, unhealthy)."""

    exit_code = 1
