"""Stored strings made harmless for a terminal."""

from __future__ import annotations

import re

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
"""C0 (but tab and newline), DEL and C1 control characters."""
_CONTROL_OR_NEWLINE = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def terminal_text(value: object, *, multiline: bool = False) -> str:
    """``value`` as text a terminal shows as it is: each control character (ESC, so no
    clear-screen or window-title sequence; C1 codes such as CSI) as its escape (``\\x1b``),
    newlines and tabs kept only where ``multiline``."""
    text = value if isinstance(value, str) else str(value)
    pattern = _CONTROL if multiline else _CONTROL_OR_NEWLINE
    return pattern.sub(_escape, text)


def _escape(match: re.Match[str]) -> str:
    return match.group(0).encode("unicode_escape").decode("ascii")
