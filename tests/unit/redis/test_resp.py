"""The wire format: commands packed byte for byte, replies parsed however the bytes arrive."""

from __future__ import annotations

from typing import Any

import pytest

from redis_jobs.resp import ReplyError, ReplyParser, pack_command


def parse_all(data: bytes, chunk: int | None = None) -> list[Any]:
    """Every reply in ``data``, fed whole or ``chunk`` bytes at a time."""
    parser = ReplyParser()
    replies: list[Any] = []
    step = chunk or len(data)
    for start in range(0, len(data), step):
        parser.feed(data[start : start + step])
        replies.extend(parser.replies())
    return replies


def test_a_command_is_an_array_of_bulk_strings() -> None:
    packed = pack_command(["EVALSHA", b"ab", 2, -7, 1.5, "é"])
    assert packed == (
        b"*6\r\n$7\r\nEVALSHA\r\n$2\r\nab\r\n$1\r\n2\r\n$2\r\n-7\r\n$3\r\n1.5\r\n$2\r\n\xc3\xa9\r\n"
    )


def test_text_arguments_use_the_given_encoding() -> None:
    assert pack_command(["é"], "latin-1") == b"*1\r\n$1\r\n\xe9\r\n"
    with pytest.raises(UnicodeEncodeError):
        pack_command(["\ud800"])
    assert pack_command(["\ud800"], "utf-8", "replace") == b"*1\r\n$1\r\n?\r\n"


def test_an_argument_of_another_type_is_refused_by_name() -> None:
    with pytest.raises(TypeError, match=r"\[1\]"):
        pack_command(["SET", [1]])  # type: ignore[list-item]


RESP2 = (
    b":42\r\n"
    b"$5\r\nhe\r\nl\r\n"  # a bulk string may hold CRLF
    b"$-1\r\n"
    b"$0\r\n\r\n"
    b"*3\r\n:1\r\n*2\r\n$1\r\na\r\n:-2\r\n$-1\r\n"
    b"*-1\r\n"
    b"*0\r\n"
    b"+OK\r\n"
    b"-JOBSCRIPT key x holds a list\r\n"
)


def test_resp2_replies() -> None:
    replies = parse_all(RESP2)
    assert replies[:8] == [42, b"he\r\nl", None, b"", [1, [b"a", -2], None], None, [], b"OK"]
    assert isinstance(replies[8], ReplyError)
    assert replies[8].text == "JOBSCRIPT key x holds a list"


@pytest.mark.parametrize("chunk", [1, 2, 3, 7])
def test_replies_split_anywhere_parse_the_same(chunk: int) -> None:
    whole = parse_all(RESP2)
    split = parse_all(RESP2, chunk)
    assert [str(r) if isinstance(r, ReplyError) else r for r in split] == [
        str(r) if isinstance(r, ReplyError) else r for r in whole
    ]


def test_resp3_replies() -> None:
    data = (
        b"_\r\n"
        b"#t\r\n#f\r\n"
        b",1.5\r\n"
        b"(12345678901234567890\r\n"
        b"=7\r\ntxt:abc\r\n"
        b"!5\r\nERR x\r\n"
        b"~2\r\n:1\r\n:2\r\n"
        b"%1\r\n$1\r\nk\r\n:3\r\n"
    )
    replies = parse_all(data)
    assert replies[:5] == [None, True, False, 1.5, 12345678901234567890]
    assert replies[5] == b"abc"
    assert isinstance(replies[6], ReplyError)
    assert replies[6].text == "ERR x"
    assert replies[7:] == [[1, 2], {b"k": 3}]


def test_push_messages_are_not_replies_and_attributes_are_dropped() -> None:
    data = b">2\r\n$7\r\nmessage\r\n$1\r\nx\r\n:1\r\n|1\r\n+ttl\r\n:5\r\n$2\r\nok\r\n"
    assert parse_all(data) == [1, b"ok"]
    assert parse_all(data, 1) == [1, b"ok"]


def test_an_unfinished_reply_waits_for_its_bytes() -> None:
    parser = ReplyParser()
    parser.feed(b"*2\r\n:1\r\n$3\r\nab")
    assert list(parser.replies()) == []
    parser.feed(b"c\r\n:9\r\n")
    assert list(parser.replies()) == [[1, b"abc"], 9]
    assert list(parser.replies()) == []


def test_bytes_that_are_not_resp_raise() -> None:
    parser = ReplyParser()
    parser.feed(b"?what\r\n")
    with pytest.raises(ValueError, match="not a RESP reply"):
        list(parser.replies())
