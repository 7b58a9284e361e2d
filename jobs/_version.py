"""The installed distribution's version: ``version`` in pyproject.toml is its one source."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("neverlost")
except PackageNotFoundError:  # pragma: no cover - sources imported without an install
    __version__ = "0+unknown"
