"""Typed bean names."""

from __future__ import annotations

from typing import Generic, TypeVar

T_co = TypeVar("T_co", covariant=True)


class Token(Generic[T_co]):
    """A bean name that carries the bean's type, so ``context.get_value(token)`` is typed.

    >>> JOB_QUEUE: Token[JobQueue] = Token("job_queue")
    """

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        if not name.isidentifier():
            raise ValueError(f"a token name must be an identifier, got {name!r}")
        self.name = name

    def __repr__(self) -> str:
        return f"Token({self.name!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Token) and other.name == self.name

    def __hash__(self) -> int:
        return hash(("Token", self.name))


def bean_name(key: Token[object] | str) -> str:
    """The plain name behind a token or a name."""
    return key.name if isinstance(key, Token) else key
