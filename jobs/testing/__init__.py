"""Test support that ships: the driver conformance suite and its harness protocol.

A third-party driver proves itself by subclassing ``DriverConformance`` in a pytest module and
providing a ``driver_harness`` fixture (needs pytest and pytest-asyncio)::

    class TestMyDriver(DriverConformance):
        @pytest.fixture
        async def driver_harness(self):
            harness = MyHarness()
            yield harness
            await harness.cleanup()
"""

from .conformance import DriverConformance, DriverHarness
from .operations import OPERATIONS_CASES, OperationsConformance
from .requests import new_request

__all__ = [
    "OPERATIONS_CASES",
    "DriverConformance",
    "DriverHarness",
    "OperationsConformance",
    "new_request",
]
