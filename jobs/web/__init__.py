"""The dashboard: see and act on jobs in a browser (``create_dashboard``, an ASGI app).

Needs the ``dashboard`` extra (Starlette, Jinja2, uvicorn, python-multipart):
``pip install 'neverlost[dashboard]'``.
"""

from . import _extra  # noqa: F401  (first: without Starlette, one line naming the extra)
from .app import create_dashboard

__all__ = ["create_dashboard"]
