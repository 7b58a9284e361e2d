"""Fixtures of the CLI tests: the real ``neverlost`` console script in a subprocess."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from tests.stores import StoreTarget
from tests.support import wait_until

REPO = Path(__file__).resolve().parents[2]
NEVERLOST = str(Path(sys.executable).parent / "neverlost")
APP = "tests.cli.app:CliTestApp"
DURABLE_WITH_OPERATIONS: tuple[str, ...] = ("sqlite", "postgres", "redis")
"""Durable stores whose drivers implement the operations SPI (issue 10): the operator commands,
--burst and the live-worker listing are tested on these (and on the reference driver)."""


def cli_env(target: StoreTarget, ledger: Path | None = None) -> dict[str, str]:
    env = {**os.environ, "CLI_TEST_TARGET": target.to_json(), "PYTHONUNBUFFERED": "1"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    if ledger is not None:
        env["CLI_TEST_LEDGER"] = str(ledger)
    return env


class CliProcess:
    """A ``neverlost`` process; its stderr (the log) goes to a file the test can read."""

    def __init__(self, process: asyncio.subprocess.Process, log: Path) -> None:
        self.process = process
        self.log = log

    def log_text(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    async def wait_for_log(self, text: str, timeout: float = 30) -> None:  # noqa: ASYNC109
        def seen() -> bool:
            if self.process.returncode is not None and text not in self.log_text():
                raise AssertionError(
                    f"neverlost exited before {text!r}:\n{self.log_text()[-3000:]}"
                )
            return text in self.log_text()

        await wait_until(seen, timeout=timeout, interval=0.05, message=f"{text!r} in the log")

    def signal(self, signum: int = signal.SIGTERM) -> None:
        self.process.send_signal(signum)

    async def exit_code(self, timeout: float = 30) -> int:  # noqa: ASYNC109
        try:
            return await asyncio.wait_for(self.process.wait(), timeout)
        except TimeoutError:
            raise AssertionError(f"neverlost did not exit:\n{self.log_text()[-3000:]}") from None


SpawnCli = Callable[..., Awaitable[CliProcess]]


@pytest.fixture
async def spawn_cli(tmp_path: Path) -> AsyncIterator[SpawnCli]:
    """Start ``neverlost ARGS...`` with the target's environment; killed at teardown."""
    started: list[CliProcess] = []

    async def spawn(*args: str, env: dict[str, str]) -> CliProcess:
        log = tmp_path / f"neverlost-{len(started)}.log"
        with log.open("wb") as stderr:
            process = await asyncio.create_subprocess_exec(
                NEVERLOST, *args, cwd=REPO, env=env,
                stdin=asyncio.subprocess.DEVNULL, stdout=stderr, stderr=stderr,
            )  # fmt: skip
        started.append(CliProcess(process, log))
        return started[-1]

    yield spawn
    for cli in started:
        if cli.process.returncode is None:
            cli.process.kill()
            await cli.process.wait()


def read_ledger(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
