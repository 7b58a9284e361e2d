"""RedisWire: one pipelined connection that carries the driver's script calls.

Why not the redis-py client for these: its per-command path (connection pool, argument
encoding, response parser, timeout wrapper) costs more than the Lua script itself; one job at a
time, that capped a producer at half the enqueues per second Redis could serve. Here a call is
one ``transport.write`` of pre-packed bytes, and replies are parsed as they arrive and handed to
their callers in order (Redis answers a connection's commands in the order sent), so any number
of calls share the connection without waiting for each other.

The connection itself is made by redis-py, from the client's own settings (``make_connection``:
host or unix socket, TLS, AUTH, db, client name, RESP version, connect timeout and retries);
once its handshake is done the wire takes over its transport and reads it with ``ReplyParser``.
The redis-py connection object is kept, and closes the socket on ``close``.

Failure: a connection that drops fails every call waiting on it with StoreUnavailableError (the
command may or may not have run: the callers' scripts are safe to rerun); the next call
reconnects. A reply that takes longer than ``reply_timeout_s`` (the client's socket timeout,
else ``DEFAULT_REPLY_TIMEOUT_S``) drops the connection the same way, so a server that stopped
answering does not hang its callers.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable, Iterable
from typing import Any

from loguru import logger
from redis.asyncio import Redis
from redis.asyncio.connection import AbstractConnection

from jobs.errors import DriverError, StoreUnavailableError

from .errors import translate
from .resp import ReplyError, ReplyParser

ReplyHandler = Callable[[Any], None]
"""Called once with a command's reply: a value, a ReplyError, or the error that lost it."""
Request = tuple[bytes, ReplyHandler]

DEFAULT_REPLY_TIMEOUT_S = 10.0


class RedisWire:
    """Pipelined requests on one connection made with ``client``'s settings."""

    def __init__(self, client: Redis) -> None:
        self._client = client
        self._connection: AbstractConnection | None = None
        self._transport: asyncio.WriteTransport | None = None
        self._parser = ReplyParser()
        self._waiting: deque[tuple[ReplyHandler, float]] = deque()
        self._queued: list[Request] = []
        self._connecting: asyncio.Task[None] | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._idle: list[asyncio.Future[None]] = []
        self._closed = False
        timeout = client.connection_pool.connection_kwargs.get("socket_timeout")
        self.reply_timeout_s: float = timeout or DEFAULT_REPLY_TIMEOUT_S

    def submit(self, requests: Iterable[Request]) -> None:
        """Send each request; its handler gets the reply. Never blocks, never raises."""
        if self._closed:
            error = DriverError("the Redis job driver is closed")
            for _, handler in requests:
                _deliver(handler, error)
            return
        transport = self._transport
        if transport is not None:
            if not transport.is_closing():
                self._write(transport, requests)
                return
            # closed under us (a failed write); its connection_lost is still to come
            self._lost(StoreUnavailableError("Redis closed the connection"))
        self._queued.extend(requests)
        if self._connecting is None:
            self._connecting = asyncio.get_running_loop().create_task(
                self._connect(), name="redis-jobs-wire-connect"
            )

    async def request(self, data: bytes) -> Any:
        """The reply to one packed command (a ReplyError is returned, not raised)."""
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self.submit([(data, lambda reply: _settle(future, reply))])
        reply = await future
        if isinstance(reply, BaseException) and not isinstance(reply, ReplyError):
            raise reply  # the call was lost (connection, timeout, closed driver)
        return reply

    @property
    def _busy(self) -> bool:
        return bool(self._queued or self._waiting) or self._connecting is not None

    async def idle(self) -> None:
        """Wait until no call is queued or waiting for its reply."""
        while self._busy:
            future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._idle.append(future)
            await future

    async def close(self) -> None:
        """Drop the connection; calls still waiting fail with StoreUnavailableError."""
        self._closed = True
        if self._connecting is not None:
            self._connecting.cancel()
            await asyncio.gather(self._connecting, return_exceptions=True)
        self._drop(StoreUnavailableError("the Redis job driver closed its connection"))
        await self._release()

    # -- internals -----------------------------------------------------------------------------

    def _write(self, transport: asyncio.WriteTransport, requests: Iterable[Request]) -> None:
        loop = asyncio.get_running_loop()
        now = loop.time()
        chunks = []
        for data, handler in requests:
            chunks.append(data)
            self._waiting.append((handler, now))
        transport.write(b"".join(chunks))
        if self._timer is None:
            self._timer = loop.call_at(
                now + self.reply_timeout_s, self._check_timeout
            )

    async def _release(self) -> None:
        """Let redis-py forget the dropped connection's socket (it warns of unclosed ones)."""
        connection, self._connection = self._connection, None
        if connection is not None:
            await connection.disconnect(nowait=True)

    async def _connect(self) -> None:
        await self._release()
        connection: AbstractConnection = self._client.connection_pool.make_connection()  # type: ignore[no-untyped-call]
        try:
            await connection.connect()  # type: ignore[no-untyped-call]
            transport = _transport_of(connection)
        except BaseException as exc:
            error = translate(exc)
            if not isinstance(error, DriverError):
                error = StoreUnavailableError(f"Redis is unavailable: {exc!r}")
                error.__cause__ = exc
            queued, self._queued = self._queued, []
            self._connecting = None
            for _, handler in queued:
                _deliver(handler, error)
            self._wake_idle()
            await connection.disconnect(nowait=True)
            if isinstance(exc, asyncio.CancelledError):
                raise
            return
        self._connection = connection
        self._parser = ReplyParser()
        transport.set_protocol(_WireProtocol(self, transport))
        self._transport = transport
        self._connecting = None
        queued, self._queued = self._queued, []
        if queued:
            self._write(transport, queued)

    def _received(self, data: bytes) -> None:
        self._parser.feed(data)
        try:
            for reply in self._parser.replies():
                handler, _ = self._waiting.popleft()
                _deliver(handler, reply)
        except (ValueError, IndexError) as exc:  # not RESP, or a reply nobody asked for
            logger.error("unexpected data from Redis ({!r}); dropping the connection", exc)
            self._drop(StoreUnavailableError(f"Redis sent unexpected data: {exc!r}"))
            return
        if not self._waiting:
            self._wake_idle()

    def _check_timeout(self) -> None:
        self._timer = None
        if not self._waiting:
            return
        now = asyncio.get_running_loop().time()
        oldest = self._waiting[0][1]
        if now - oldest >= self.reply_timeout_s:
            self._drop(
                StoreUnavailableError(f"Redis did not reply within {self.reply_timeout_s:g} s")
            )
        else:
            self._timer = asyncio.get_running_loop().call_at(
                oldest + self.reply_timeout_s, self._check_timeout
            )

    def _drop(self, error: BaseException) -> None:
        transport = self._transport
        if transport is not None:
            transport.abort()  # its connection_lost comes later and finds nothing to fail
        self._lost(error)

    def _lost(self, error: BaseException) -> None:
        self._transport = None
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        waiting, self._waiting = self._waiting, deque()
        for handler, _ in waiting:
            _deliver(handler, error)
        self._wake_idle()

    def _protocol_lost(self, transport: asyncio.BaseTransport, exc: Exception | None) -> None:
        if transport is not self._transport:
            return
        reason = f": {exc}" if exc is not None else ""
        self._lost(StoreUnavailableError(f"Redis closed the connection{reason}"))

    def _wake_idle(self) -> None:
        if self._busy:
            return
        idle, self._idle = self._idle, []
        for future in idle:
            if not future.done():
                future.set_result(None)


class _WireProtocol(asyncio.Protocol):
    def __init__(self, wire: RedisWire, transport: asyncio.BaseTransport) -> None:
        self._wire = wire
        self._transport = transport

    def data_received(self, data: bytes) -> None:
        if self._transport is self._wire._transport:
            self._wire._received(data)

    def eof_received(self) -> bool:
        return False  # close the transport: connection_lost follows

    def connection_lost(self, exc: Exception | None) -> None:
        self._wire._protocol_lost(self._transport, exc)


def _transport_of(connection: AbstractConnection) -> asyncio.WriteTransport:
    """The connected socket's transport, handed over from redis-py's stream writer."""
    writer = getattr(connection, "_writer", None)
    transport = getattr(writer, "transport", None)
    if not isinstance(transport, asyncio.WriteTransport):
        raise DriverError(
            "this redis-py version does not expose its connection's transport "
            f"({type(connection).__name__}._writer); redis_jobs needs redis>=5,<9"
        )
    return transport


def _deliver(handler: ReplyHandler, reply: Any) -> None:
    try:
        handler(reply)
    except Exception:  # a handler's bug must not stop the replies after it
        logger.exception("a Redis reply handler failed")


def _settle(future: asyncio.Future[Any], reply: Any) -> None:
    if not future.done():
        future.set_result(reply)
