"""The dashboard: see and act on jobs in a browser (``create_dashboard``, an ASGI app)."""

from .app import create_dashboard

__all__ = ["create_dashboard"]
