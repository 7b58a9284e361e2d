"""The dashboard extra's check, imported first by the package: without Starlette, Jinja2 or
uvicorn, ``jobs.web`` (and ``neverlost dashboard``) fails with one line naming the extra."""

from ..errors import require_extra

require_extra("The dashboard (jobs.web)", "dashboard", "starlette", "jinja2", "uvicorn")
