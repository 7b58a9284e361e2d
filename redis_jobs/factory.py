"""The Redis driver's entry in the ``neverlost.drivers`` entry points (``jobs.spi.factories``):
a driver, and the removal of a namespace's keys, from a URL."""

from __future__ import annotations

from typing import Any

from jobs.spi import DriverFactory, JobDriver

from .admin import delete_namespace, list_namespaces
from .driver import RedisJobDriver
from .topology import client_from_url

__all__ = ["FACTORY"]


def open_driver(url: str, **options: Any) -> JobDriver:
    """``RedisJobDriver(url=url, namespace=...)``: ``prefix`` or ``namespace`` names the
    namespace ("jobs"); ``create`` changes nothing (reads write nothing)."""
    if options.pop("table_prefix", None) is not None:
        raise ValueError("table_prefix is for SQL URLs; a Redis store takes namespace")
    options.pop("create", None)
    prefix = options.pop("prefix", None)
    namespace = options.pop("namespace", None) or prefix or "jobs"
    return RedisJobDriver(url=url, namespace=namespace, **options)


async def drop(url: str, prefix: str) -> None:
    """Delete every key of the namespace ``prefix`` (``delete_namespace``)."""
    client = client_from_url(url)
    try:
        await delete_namespace(client, prefix)
    finally:
        await client.aclose()


async def namespaces(url: str) -> list[str]:
    """The namespaces holding jobs at ``url`` (``list_namespaces``)."""
    client = client_from_url(url)
    try:
        return await list_namespaces(client)
    finally:
        await client.aclose()


FACTORY = DriverFactory(open_driver=open_driver, drop=drop, prefixes=namespaces, extra="redis")
"""Registered for redis, rediss, unix and the +cluster/+sentinel forms."""
