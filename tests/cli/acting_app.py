"""Apps for the CLI answer tests: ``StartFailsApp`` has a lifecycle bean whose start fails the
way a store that is not there does (an OSError)."""

from __future__ import annotations

from framework import configuration, entry
from tests.cli.app import CliTestApp


class UnreachableService:
    phase = 15
    auto_startup = True
    is_running = False

    def start(self) -> None:
        raise OSError("connection refused by 10.9.9.9:5432")

    def stop(self) -> None:
        pass


@configuration
class StartFailsApp(CliTestApp):
    @entry()
    def unreachable_service(self) -> UnreachableService:
        return UnreachableService()
