"""Apps for the CLI tests of issue 33: ``StartFailsApp`` has a lifecycle bean whose start fails
the way a store that is not there does (an OSError); ``TypedApp`` a handler taking a job
definition."""

from __future__ import annotations

from pydantic import BaseModel

from framework import configuration, entry
from jobs import define_job, job_handler
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


class Receipt(BaseModel):
    invoice_id: int
    email: str | None = None


SEND_RECEIPT = define_job("receipt.send", Receipt, max_attempts=5)


class ReceiptHandlers:
    @job_handler(SEND_RECEIPT)
    async def send(self, receipt: Receipt) -> None:
        pass


@configuration
class TypedApp(CliTestApp):
    """CliTestApp with a handler taking a job definition (``receipt.send``, model Receipt)."""

    @entry()
    def receipt_handlers(self) -> ReceiptHandlers:
        return ReceiptHandlers()
