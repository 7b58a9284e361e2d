"""The ``neverlost`` command group: one-line errors, and commands other packages plug in.

Every command of this package registers itself on ``cli``. A command that lives in another
package (``neverlost dashboard``, in ``jobs.web``) is named in ``LAZY_COMMANDS`` as
``"module:attr"``: it is imported only when used or listed, so ``neverlost worker`` does not
pay for the web stack; while its module is missing the command is simply not offered. Another
package may also add to ``cli`` directly with ``@cli.command()``.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Sequence
from typing import Any

import click

from .. import __version__
from ..errors import MissingExtraError
from .logs import configure_logging

LAZY_COMMANDS: dict[str, str] = {"dashboard": "jobs.web.command:dashboard"}
"""Commands defined outside this package: name -> ``module:attr`` of a click command."""


class NeverlostGroup(click.Group):
    """A click group whose errors are one line each (usage errors exit 2, others 1)."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        lazy = [name for name in LAZY_COMMANDS if self._lazy(name) is not None]
        return sorted({*super().list_commands(ctx), *lazy})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        return super().get_command(ctx, cmd_name) or self._lazy(cmd_name)

    def _lazy(self, name: str) -> click.Command | None:
        target = LAZY_COMMANDS.get(name)
        if target is None:
            return None
        module_name, _, attr = target.partition(":")
        try:
            module = importlib.import_module(module_name)
        except MissingExtraError as exc:
            return _needs_extra(name, exc)
        except ModuleNotFoundError as exc:
            if exc.name is not None and module_name.startswith(exc.name):
                return None  # the package that provides it is not there
            raise
        command = getattr(module, attr)
        if not isinstance(command, click.Command):
            raise TypeError(f"{target} is not a click command")
        return command

    def main(
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        **extra: Any,
    ) -> Any:
        try:
            result = super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        except MissingExtraError as exc:
            click.echo(f"Error: {exc}", err=True)
            sys.exit(1)
        except click.UsageError as exc:
            where = exc.ctx.command_path if exc.ctx is not None else "neverlost"
            click.echo(f"Error: {exc.format_message()} (see '{where} --help')", err=True)
            sys.exit(exc.exit_code)
        except click.ClickException as exc:
            exc.show()
            sys.exit(exc.exit_code)
        except click.Abort:
            click.echo("Aborted.", err=True)
            sys.exit(1)
        if not standalone_mode:
            return result
        sys.exit(result if isinstance(result, int) else 0)


def _needs_extra(name: str, missing: MissingExtraError) -> click.Command:
    """A stand-in for a command whose extra is not installed: listed, and failing in one line."""
    message = str(MissingExtraError(f"neverlost {name}", missing.extra, missing.name or ""))

    def fail() -> None:
        raise click.ClickException(message)

    return click.Command(
        name,
        callback=fail,
        help=f"(not installed) {message}",
        short_help=f"(needs the {missing.extra} extra)",
        add_help_option=False,
        context_settings={"ignore_unknown_options": True, "allow_extra_args": True},
    )


@click.group(
    name="neverlost", cls=NeverlostGroup, context_settings={"help_option_names": ["-h", "--help"]}
)
@click.version_option(__version__, prog_name="neverlost", message="%(prog)s %(version)s")
def cli() -> None:
    """neverlost: run workers and operate the job store.

    APP is module:attr naming a @configuration class, a list of them or an
    ApplicationBuilder (JobsAutoConfiguration is added when absent). Commands that read or
    change the store take APP or --url instead (sqlite+aiosqlite://, postgresql://,
    redis://); NEVERLOST_APP and NEVERLOST_URL set them from the environment.
    """
    configure_logging("WARNING", json_lines=False)  # the worker sets its own --log-level
