"""A driver from a URL, for the APIs that take one (``SyncJobQueue``, ``Worker``).

The same drivers as the ``neverlost`` command line's ``--url`` (``jobs.cli.target``), bad input
as a ValueError naming the URL (redacted) and the accepted schemes. When drivers register
themselves by URL scheme, this is the one place that asks the registry.
"""

from __future__ import annotations

from .spi.driver import JobDriver

__all__ = ["driver_from_url"]


def driver_from_url(
    url: str, *, namespace: str | None = None, table_prefix: str | None = None, owner: str
) -> JobDriver:
    """A driver owning its connections for ``url``; ValueError (naming ``owner``) if it is
    not one a driver takes."""
    from .cli.errors import CliUsageError
    from .cli.target import driver_from_url as cli_driver_from_url

    try:
        return cli_driver_from_url(url, namespace, table_prefix)
    except CliUsageError as exc:
        raise ValueError(f"{owner}: {exc.message.removeprefix('--url ')}") from None
