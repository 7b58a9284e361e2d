"""JSON payload checks: anything that would not come back as it went in fails loudly, by path.

Payloads are stored as JSON text. ``encode_payload`` walks the value once, naming the first
thing that would not round-trip (``payload["items"][2]["deep"]: set is not JSON``), then
serialises it compactly. Control characters, ``\\u0000`` included, are escaped in the text, so
every store can keep it.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from typing import Any

from .errors import JobTypeError, PayloadError, PayloadTooLargeError

MAX_DEPTH = 500
MAX_TYPE_LENGTH = 255
MAX_KEY_LENGTH = 1024

_HINTS = {
    "set": "use a list",
    "frozenset": "use a list",
    "tuple": "use a list",
    "bytes": "decode it or base64-encode it",
    "bytearray": "decode it or base64-encode it",
    "datetime": "use an ISO 8601 string",
    "date": "use an ISO 8601 string",
    "time": "use an ISO 8601 string",
    "Decimal": "use a string",
    "UUID": "use str(uuid)",
}

_ENCODER = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":"))


def _refuse(value: Any) -> Any:
    raise TypeError(f"{type(value).__name__} is not JSON")


def _one_shot_encoder() -> Callable[[Any, int], Sequence[str]] | None:
    """``_ENCODER``'s C encoder, made once: ``JSONEncoder.encode`` makes a new one on every
    call (about half the cost of encoding a small payload). It keeps no markers, so a cycle
    ends in RecursionError rather than ValueError; both are refused the same way."""
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None:  # pragma: no cover - CPython has the C accelerator
        return None
    encoder: Callable[[Any, int], Sequence[str]] = make(
        None, _refuse, json.encoder.encode_basestring, None, ":", ",", False, False, False
    )
    return encoder


_ONE_SHOT = _one_shot_encoder()


def encode_payload(value: Any, *, max_bytes: int | None = None) -> str:
    """The JSON text of ``value``; PayloadError naming the path if it would not round-trip.

    The common case is one encode and a quick walk with no path bookkeeping; anything either
    of them refuses is walked again by ``check_payload``, which names what and where.
    """
    try:
        text = "".join(_ONE_SHOT(value, 0)) if _ONE_SHOT is not None else _ENCODER.encode(value)
        # ASCII text has no lone surrogate and is its own UTF-8; other text is encoded to
        # check both (UnicodeEncodeError is a ValueError).
        size = len(text) if text.isascii() else len(text.encode("utf-8"))
        plain = _is_plain(value)
    except (TypeError, ValueError, RecursionError):  # ValueError: NaN, a cycle, a surrogate
        plain = False
    if not plain:
        check_payload(value)
        raise PayloadError(f"payload: {type(value).__name__} value is not JSON", "payload")
    if max_bytes is not None and size > max_bytes:
        raise PayloadTooLargeError(size, max_bytes)
    return text


_SCAN: Callable[[str, int], tuple[Any, int]] = json.JSONDecoder().scan_once  # type: ignore[attr-defined]


def decode_payload(text: str) -> Any:
    """The value of a payload's JSON text. Compact text (what ``encode_payload`` writes) is
    scanned at once; anything else (whitespace around it, an error to raise) goes through
    ``json.loads``, which costs three more calls and two regex matches a job."""
    try:
        value, end = _SCAN(text, 0)
    except StopIteration:
        return json.loads(text)
    return value if end == len(text) else json.loads(text)


def check_payload(value: Any) -> None:
    """Raise PayloadError for the first part of ``value`` that is not plain JSON."""
    # An explicit stack: deep payloads must not hit Python's recursion limit here.
    stack: list[_Pending] = [(value, "payload", 0, frozenset())]
    while stack:
        item, path, depth, ancestors = stack.pop()
        kind = type(item)
        if item is None or kind is bool or kind is int:
            continue
        if kind is str:
            _check_text(item, path)
        elif kind is float:
            if not math.isfinite(item):
                raise PayloadError(f"{path}: float {item!r} is not JSON", path)
        elif isinstance(item, dict | list):
            stack.extend(_children(item, path, depth, ancestors))
        else:
            name = kind.__name__
            hint = _HINTS.get(name)
            suffix = f" ({hint})" if hint else ""
            raise PayloadError(f"{path}: {name} is not JSON{suffix}", path)


_Pending = tuple[Any, str, int, frozenset[int]]
_SCALARS = frozenset({str, int, float, bool, type(None)})


def _is_plain(value: Any) -> bool:
    """Whether ``value`` (already known to encode, so acyclic) passes ``check_payload``."""
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        kind = type(item)
        if kind is dict:
            for key in item:
                if type(key) is not str:
                    return False
            children = item.values()
        elif kind is list:
            children = item
        else:
            return kind in _SCALARS
        if depth >= MAX_DEPTH:
            return False
        for child in children:
            child_kind = type(child)
            if child_kind is dict or child_kind is list:
                stack.append((child, depth + 1))
            elif child_kind not in _SCALARS:
                return False
    return True


def _children(
    container: dict[Any, Any] | list[Any], path: str, depth: int, ancestors: frozenset[int]
) -> list[_Pending]:
    if depth >= MAX_DEPTH:
        raise PayloadError(f"{path}: nested deeper than {MAX_DEPTH} levels", path)
    if id(container) in ancestors:
        raise PayloadError(f"{path}: circular reference", path)
    inner = ancestors | {id(container)}
    if isinstance(container, list):
        return [(child, f"{path}[{i}]", depth + 1, inner) for i, child in enumerate(container)]
    children: list[_Pending] = []
    for key, child in container.items():
        if type(key) is not str:
            raise PayloadError(
                f"{path}: key {key!r} ({type(key).__name__}) is not a string; "
                "JSON keys are strings",
                path,
            )
        child_path = f"{path}[{json.dumps(key, ensure_ascii=False)}]"
        _check_text(key, child_path)
        children.append((child, child_path, depth + 1, inner))
    return children


def _check_text(text: str, path: str) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        bad = text[exc.start : exc.end]
        raise PayloadError(
            f"{path}: string has a lone surrogate {bad!r} and is not valid Unicode", path
        ) from None


def check_name(kind: str, value: object, max_length: int) -> str:
    """A job type or key: a non-empty string of valid Unicode without NUL, any other text."""
    if not isinstance(value, str):
        raise JobTypeError(f"{kind} must be a string, got {type(value).__name__}")
    if not value:
        raise JobTypeError(f"{kind} must not be empty")
    if len(value) > max_length:
        raise JobTypeError(f"{kind} is {len(value)} characters, over the limit of {max_length}")
    if "\x00" in value:
        raise JobTypeError(f"{kind} {value!r} contains NUL, which stores cannot keep")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise JobTypeError(f"{kind} {value!r} is not valid Unicode") from None
    return value
