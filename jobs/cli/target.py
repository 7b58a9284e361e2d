"""What a command talks to: the store of an APP's context, or one opened from ``--url``.

Operator commands build the APP's context without starting its lifecycle beans (no scheduler
pass, no user services), start only the handler registry (so schedules and handler options
are known), and close it afterwards. ``--url`` opens a driver alone.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import click

from framework import ApplicationContext, FrameworkError, start_lifecycles

from ..drivers import UnknownSchemeError, open_driver
from ..errors import MissingExtraError
from ..health import store_name
from ..queue import JobQueue
from ..redaction import redact_url
from ..spi import JobDriver, OutboxStore
from ..tokens import JOB_DRIVER, JOB_HANDLER_REGISTRY, JOB_QUEUE, OUTBOX_STORE
from .errors import CliUsageError
from .loading import load_builder

F = TypeVar("F", bound=Callable[..., Any])

ACCEPTED = "sqlite+aiosqlite://, postgresql:// (or postgres://), redis:// (or rediss://)"


@dataclass(frozen=True, slots=True)
class TargetSpec:
    """APP or --url, as given on the command line (checked by ``check``)."""

    app: str | None
    url: str | None
    namespace: str | None
    table_prefix: str | None

    def check(self) -> None:
        if self.app and self.url:
            raise CliUsageError("give APP or --url, not both")
        if not self.app and not self.url:
            raise CliUsageError(
                "give APP (module:attr) or --url (or set NEVERLOST_APP / NEVERLOST_URL)"
            )
        if self.app and (self.namespace or self.table_prefix):
            raise CliUsageError(
                "--namespace and --table-prefix go with --url; APP configures its own driver"
            )


class Target:
    """The store a command works on; ``close()`` releases what was opened for it."""

    def __init__(
        self, driver: JobDriver, queue: JobQueue, context: ApplicationContext | None
    ) -> None:
        self.driver = driver
        self.queue = queue
        self.context = context

    @property
    def outbox(self) -> OutboxStore | None:
        """The APP's outbox store (bean ``outbox_store``), if it declares one."""
        if self.context is None or OUTBOX_STORE.name not in self.context:
            return None
        return self.context.get_value(OUTBOX_STORE)

    @property
    def description(self) -> str:
        return describe_store(self.driver)

    async def close(self) -> None:
        if self.context is not None:
            await self.context.close()
        else:
            await self.driver.close()


def _store_options(command: F) -> F:
    options = [
        click.option(
            "--url",
            envvar="NEVERLOST_URL",
            help=f"Open the store directly instead of APP: {ACCEPTED}",
        ),
        click.option("--namespace", help="With a redis:// --url: the driver's namespace [jobs]."),
        click.option(
            "--table-prefix", help="With a SQL --url: the prefix of the jobs table [jobs_]."
        ),
    ]
    for option in reversed(options):
        command = option(command)
    return command


def target_options(command: F) -> F:
    """The APP argument and the --url, --namespace, --table-prefix options of a command."""
    command = _store_options(command)
    return click.argument("app", required=False, envvar="NEVERLOST_APP", metavar="[APP]")(command)


def id_target_options(command: F) -> F:
    """Like ``target_options``, for a command that also takes job IDs: ``[APP] ID...``.

    An APP always has a colon (``module:attr``) and a job id never does, so one positional
    list holds both; the command receives ``app`` and ``job_ids``.
    """
    command = _store_options(command)
    return click.argument(
        "app_and_ids", nargs=-1, metavar="[APP] ID...", callback=_split_app, expose_value=False
    )(command)


def _split_app(ctx: click.Context, _param: click.Parameter, values: tuple[str, ...]) -> None:
    apps = [value for value in values if ":" in value]
    if len(apps) > 1:
        raise CliUsageError(f"one APP at most, got {', '.join(apps)}")
    env_app = os.environ.get("NEVERLOST_APP") or None
    ctx.params["app"] = apps[0] if apps else env_app
    ctx.params["job_ids"] = tuple(value for value in values if ":" not in value)


def target_spec(params: dict[str, Any]) -> TargetSpec:
    """Take the target options out of a command's parameters."""
    spec = TargetSpec(
        params.pop("app"), params.pop("url"), params.pop("namespace"), params.pop("table_prefix")
    )
    spec.check()
    return spec


async def open_target(spec: TargetSpec, *, create: bool = True) -> Target:
    """The target's driver and queue. ``create=False`` (the read-only commands): a store opened
    from ``--url`` creates nothing, no SQLite file and no table; an APP's store is configured
    by the APP."""
    if spec.url:
        driver = driver_from_url(spec.url, spec.namespace, spec.table_prefix, create=create)
        return Target(driver, JobQueue(driver), None)
    assert spec.app is not None
    try:
        context = await load_builder(spec.app).run(start=False)
    except FrameworkError as exc:
        raise CliUsageError(f"APP {spec.app!r}: {' '.join(str(exc).split())}") from None
    try:
        await start_lifecycles(context, lambda name, _: name == JOB_HANDLER_REGISTRY.name)
        return Target(context.get_value(JOB_DRIVER), context.get_value(JOB_QUEUE), context)
    except BaseException:
        await context.close()
        raise


def driver_from_url(
    url: str,
    namespace: str | None = None,
    table_prefix: str | None = None,
    *,
    create: bool = True,
) -> JobDriver:
    """A driver that owns its connection, for ``url``; CliUsageError naming a bad one.

    The driver is the one registered for the URL's scheme (``jobs.drivers``: the
    ``neverlost.drivers`` entry points). Without ``create`` a store creates nothing (a SQL
    store: no SQLite file, no table); a Redis store's reads write nothing anyway.
    """
    options: dict[str, object] = {"create": create}
    if namespace is not None:
        options["namespace"] = namespace
    if table_prefix is not None:
        options["table_prefix"] = table_prefix
    try:
        return open_driver(url, **options)
    except UnknownSchemeError as exc:
        raise CliUsageError(f"--url {exc}") from None
    except MissingExtraError:
        raise  # its own one line (exit 1): the URL is fine, the install is not
    except (ValueError, ImportError) as exc:
        message = str(exc)
        for option in ("namespace", "table_prefix"):
            message = message.replace(option, "--" + option.replace("_", "-"))
        raise CliUsageError(f"--url {redact_url(url)!r}: {message}") from None


def describe_store(driver: JobDriver) -> str:
    """The store as the services' health reports name it (``jobs.health.store_name``)."""
    return store_name(driver)
