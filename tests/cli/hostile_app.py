"""An APP whose scheduled job type is hostile to a terminal (test_terminal_safety)."""

from __future__ import annotations

import os
from typing import Any

from framework import configuration, entry
from jobs import JOB_DRIVER, JobDriver, job_handler
from tests.stores import StoreTarget

HOSTILE_SCHEDULED_TYPE = "nightly[/bold]\x1b]0;pwned\x07"


class HostileHandlers:
    @job_handler(HOSTILE_SCHEDULED_TYPE, cron="0 3 * * *", timezone="UTC")
    async def nightly(self, payload: Any) -> None:
        pass


@configuration
class HostileApp:
    @entry(JOB_DRIVER)
    def job_driver(self) -> JobDriver:
        return StoreTarget.from_json(os.environ["CLI_TEST_TARGET"]).open()

    @entry()
    def handlers(self) -> HostileHandlers:
        return HostileHandlers()
