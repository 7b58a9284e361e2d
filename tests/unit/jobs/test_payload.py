from __future__ import annotations

import datetime
import decimal
import enum
import json
import uuid
from typing import Any

import pytest

from jobs import JobTypeError, PayloadError, PayloadTooLargeError
from jobs.payload import MAX_DEPTH, check_name, encode_payload


class Thing:
    pass


class Colour(enum.StrEnum):  # json.dumps writes it as a string; it would come back a str
    RED = "red"


def circular_dict() -> dict[str, Any]:
    data: dict[str, Any] = {"a": {"b": {}}}
    data["a"]["b"]["again"] = data
    return data


def circular_list() -> list[Any]:
    data: list[Any] = [1]
    data.append(data)
    return data


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        ({"items": [0, 1, {"deep": {1, 2}}]}, 'payload["items"][2]["deep"]: set is not JSON'),
        ({"b": b"x"}, 'payload["b"]: bytes is not JSON'),
        ([(1, 2)], "payload[0]: tuple is not JSON"),
        ({"at": datetime.datetime(2026, 1, 1)}, 'payload["at"]: datetime is not JSON'),
        ({"at": datetime.date(2026, 1, 1)}, 'payload["at"]: date is not JSON'),
        ({"price": decimal.Decimal("1.1")}, 'payload["price"]: Decimal is not JSON'),
        ({"id": uuid.UUID(int=1)}, 'payload["id"]: UUID is not JSON'),
        ({"x": float("nan")}, 'payload["x"]: float nan is not JSON'),
        ([float("inf")], "payload[0]: float inf is not JSON"),
        ([float("-inf")], "payload[0]: float -inf is not JSON"),
        ({1: "a"}, "payload: key 1 (int) is not a string"),
        ({"a": {None: 1}}, 'payload["a"]: key None (NoneType) is not a string'),
        ({"a": {(1, 2): 1}}, 'payload["a"]: key (1, 2) (tuple) is not a string'),
        (circular_dict(), 'payload["a"]["b"]["again"]: circular reference'),
        (circular_list(), "payload[1]: circular reference"),
        ({"o": Thing()}, 'payload["o"]: Thing is not JSON'),
        ({"c": [Colour.RED]}, 'payload["c"][0]: Colour is not JSON'),
        ({"s": "lone \ud800 surrogate"}, 'payload["s"]: string has a lone surrogate'),
        ({"we \"quote\"": {1.5: 0}}, 'payload["we \\"quote\\""]: key 1.5 (float) is not a string'),
    ],
)
def test_non_json_payloads_fail_naming_the_path(payload: Any, message: str) -> None:
    with pytest.raises(PayloadError) as caught:
        encode_payload(payload)
    assert str(caught.value).startswith(message), str(caught.value)
    assert isinstance(caught.value, ValueError)


def test_set_hint_says_what_to_use() -> None:
    with pytest.raises(PayloadError, match=r"set is not JSON \(use a list\)"):
        encode_payload({"s": {1}})


@pytest.mark.parametrize(
    "payload",
    [
        None,
        True,
        0,
        -(2**70),
        1.5,
        "text with \u0000 and \U0001f600",
        {"nested": [{"a": None, "b": [1, 2.5, "x"]}]},
        {"shared": [{"same": 1}] * 3},
    ],
)
def test_json_payloads_round_trip(payload: Any) -> None:
    assert json.loads(encode_payload(payload)) == payload


def test_nul_is_escaped_in_the_text() -> None:
    text = encode_payload({"s": "a\u0000b"})
    assert "\x00" not in text
    assert "\\u0000" in text


def test_size_limit_counts_utf8_bytes() -> None:
    payload = "é" * 600  # 1,200 bytes of UTF-8, 602 with quotes as characters
    assert encode_payload(payload, max_bytes=1_202)
    with pytest.raises(PayloadTooLargeError) as caught:
        encode_payload(payload, max_bytes=1_201)
    assert (caught.value.size, caught.value.limit) == (1_202, 1_201)
    assert "over the limit of 1201 bytes" in str(caught.value)


def test_nesting_is_bounded_without_recursion_errors() -> None:
    payload: Any = 1
    for _ in range(MAX_DEPTH):  # MAX_DEPTH nested lists are allowed
        payload = [payload]
    assert json.loads(encode_payload(payload)) == payload
    with pytest.raises(PayloadError, match="nested deeper than"):
        encode_payload([payload])


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("", "must not be empty"),
        ("a\x00b", "contains NUL"),
        ("x" * 256, "over the limit of 255"),
        (7, "must be a string, got int"),
        ("\udc80", "not valid Unicode"),
    ],
)
def test_job_types_are_checked(value: Any, message: str) -> None:
    with pytest.raises(JobTypeError, match=message):
        check_name("job type", value, 255)


@pytest.mark.parametrize(
    "text", ['{"a":[1,2.5,"x"]}', ' {"a": 1}\n', '"text"', "null", '{"a": {"b": [true]}} ']
)
def test_decode_payload_reads_compact_and_spaced_json_alike(text: str) -> None:
    from jobs.payload import decode_payload

    assert decode_payload(text) == json.loads(text)


@pytest.mark.parametrize("text", ["", "{", '{"a":1}x', "[1,]"])
def test_decode_payload_refuses_what_json_loads_refuses(text: str) -> None:
    from jobs.payload import decode_payload

    with pytest.raises(json.JSONDecodeError):
        decode_payload(text)
