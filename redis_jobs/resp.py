"""The Redis wire format (RESP2 and RESP3): commands packed to bytes, replies parsed from bytes.

Only what the driver's script calls need, and no I/O: ``pack_command`` turns one command into
its request bytes; ``ReplyParser`` is fed the bytes as they arrive and yields each reply once it
is whole. Bulk strings come back as ``bytes`` (whatever the client's ``decode_responses``),
errors as ``ReplyError`` values (not raised: one command's error must not hide the replies
after it), RESP3 nulls as ``None``, booleans as ``bool``, maps as ``dict``. Push messages
(RESP3 ``>``: the server's notifications, not replies) are skipped; attributes are dropped
and the reply they annotate is kept.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

CommandArg = str | bytes | int | float
CRLF = b"\r\n"


class ReplyError(Exception):
    """An error reply from Redis (``-ERR ...``), returned in place of the command's reply."""

    @property
    def text(self) -> str:
        return str(self.args[0])


def pack_command(
    args: Sequence[CommandArg], encoding: str = "utf-8", errors: str = "strict"
) -> bytes:
    """The request bytes of one command: a RESP array of bulk strings."""
    parts = [b"*%d\r\n" % len(args)]
    for arg in args:
        if isinstance(arg, str):
            data = arg.encode(encoding, errors)
        elif isinstance(arg, bytes):
            data = arg
        elif isinstance(arg, int):
            data = b"%d" % arg
        elif isinstance(arg, float):
            data = repr(arg).encode()
        else:
            raise TypeError(f"a Redis command argument must be str, bytes, int or float: {arg!r}")
        parts.append(b"$%d\r\n%b\r\n" % (len(data), data))
    return b"".join(parts)


class _Incomplete(Exception):
    """The buffer ends inside a reply: wait for more bytes."""


class _Push:
    """A RESP3 push message: out-of-band, answers no command."""

    __slots__ = ()


_PUSH = _Push()


class ReplyParser:
    """Replies out of a byte stream, in order, each once it has fully arrived."""

    def __init__(self) -> None:
        self._buffer = b""

    def feed(self, data: bytes) -> None:
        self._buffer = self._buffer + data if self._buffer else data

    def replies(self) -> Iterator[Any]:
        """The whole replies in the buffer (consumed as they are yielded).

        Raises ValueError on bytes that are not RESP.
        """
        buffer, position = self._buffer, 0
        try:
            while position < len(buffer):
                try:
                    reply, position = _parse(buffer, position)
                except _Incomplete:
                    break
                if reply is not _PUSH:
                    yield reply
        finally:
            self._buffer = buffer[position:] if position < len(buffer) else b""


_Parsed = tuple[Any, int]


def _parse(buffer: bytes, position: int) -> _Parsed:
    """The reply starting at ``position`` and the position after it."""
    end = buffer.find(CRLF, position)
    if end < 0:
        raise _Incomplete
    parse = _BY_TYPE.get(buffer[position])
    if parse is None:
        raise ValueError(f"not a RESP reply: type byte {buffer[position : position + 1]!r}")
    return parse(buffer, buffer[position + 1 : end], end + 2)


def _blob(buffer: bytes, line: bytes, after: int) -> tuple[bytes | None, int]:
    size = int(line)
    if size < 0:
        return None, after
    stop = after + size
    if len(buffer) < stop + 2:
        raise _Incomplete
    return buffer[after:stop], stop + 2


def _items(buffer: bytes, line: bytes, after: int) -> tuple[list[Any] | None, int]:
    count = int(line)
    if count < 0:
        return None, after
    items = []
    for _ in range(count):
        item, after = _parse(buffer, after)
        items.append(item)
    return items, after


def _pairs(buffer: bytes, line: bytes, after: int) -> tuple[dict[Any, Any], int]:
    mapping = {}
    for _ in range(int(line)):
        field, after = _parse(buffer, after)
        mapping[field], after = _parse(buffer, after)
    return mapping, after


def _verbatim(buffer: bytes, line: bytes, after: int) -> _Parsed:
    data, after = _blob(buffer, line, after)
    return (data[4:] if data is not None else None), after  # drop the 'txt:' format prefix


def _blob_error(buffer: bytes, line: bytes, after: int) -> _Parsed:
    data, after = _blob(buffer, line, after)
    return ReplyError((data or b"").decode(errors="replace")), after


def _push(buffer: bytes, line: bytes, after: int) -> _Parsed:
    return _PUSH, _items(buffer, line, after)[1]


def _attributes(buffer: bytes, line: bytes, after: int) -> _Parsed:
    return _parse(buffer, _pairs(buffer, line, after)[1])  # the reply they annotate


_BY_TYPE: dict[int, Callable[[bytes, bytes, int], _Parsed]] = {
    ord(":"): lambda buffer, line, after: (int(line), after),
    ord("$"): _blob,
    ord("*"): _items,
    ord("+"): lambda buffer, line, after: (line, after),
    ord("-"): lambda buffer, line, after: (ReplyError(line.decode(errors="replace")), after),
    ord("_"): lambda buffer, line, after: (None, after),
    ord("#"): lambda buffer, line, after: (line == b"t", after),
    ord(","): lambda buffer, line, after: (float(line), after),
    ord("("): lambda buffer, line, after: (int(line), after),
    ord("="): _verbatim,
    ord("!"): _blob_error,
    ord("~"): _items,
    ord("%"): _pairs,
    ord(">"): _push,
    ord("|"): _attributes,
}
