from __future__ import annotations

import pytest

from jobs.testing import DriverConformance, DriverHarness


class TestInProcessDriver(DriverConformance):
    @pytest.fixture
    def driver_harness(self, inprocess_harness: DriverHarness) -> DriverHarness:
        return inprocess_harness
