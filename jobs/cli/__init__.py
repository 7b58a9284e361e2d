"""The ``neverlost`` command line: the worker process and the operator's commands.

``cli`` is the click group; another package adds a command with ``@cli.command()`` or, to be
imported lazily, through ``LAZY_COMMANDS``. ``target_options`` / ``target_spec`` /
``run_on_target`` give a command the APP-or---url store every operator command takes.
"""

from __future__ import annotations

from . import (
    audit_command,
    enqueue_command,
    loss_audit_command,
    outbox_command,
    queues_command,
    read_commands,
    worker_command,
    workflow_command,
    write_commands,
)
from .errors import CliUsageError, CommandFailed, StoreError
from .group import LAZY_COMMANDS, NeverlostGroup, cli
from .running import run_on_target
from .target import Target, TargetSpec, driver_from_url, open_target, target_options, target_spec

__all__ = [
    "cli",
    "main",
    "NeverlostGroup",
    "LAZY_COMMANDS",
    "Target",
    "TargetSpec",
    "target_options",
    "target_spec",
    "open_target",
    "run_on_target",
    "driver_from_url",
    "CliUsageError",
    "CommandFailed",
    "StoreError",
]

# imported to register their commands:
_COMMAND_MODULES = (
    audit_command,
    enqueue_command,
    loss_audit_command,
    outbox_command,
    queues_command,
    read_commands,
    worker_command,
    workflow_command,
    write_commands,
)


def main() -> None:
    """The console script ``neverlost`` (also ``python -m jobs``)."""
    cli(prog_name="neverlost")
