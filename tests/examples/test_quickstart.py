from __future__ import annotations

import pytest

from examples import quickstart


async def test_quickstart_runs(capsys: pytest.CaptureFixture[str]) -> None:
    assert await quickstart.main() == 0
    out = capsys.readouterr().out
    assert "the repeat was dropped: None" in out
    assert "sent to user2@example.com (attempt 2)" in out
    assert "'completed': 3" in out
    assert "'pending': 1" in out  # receipt.send has no handler here: it waits, it is not burned
