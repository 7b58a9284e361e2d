from __future__ import annotations

import pytest

from examples import framework_basics


async def test_framework_example_boots_and_closes(capsys: pytest.CaptureFixture[str]) -> None:
    assert await framework_basics.main() == 0
    out = capsys.readouterr().out
    assert "beans: clock, heartbeat" in out
    assert "closed: heartbeat running = False" in out
