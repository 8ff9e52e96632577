"""Small wording helpers for the views' text."""

from __future__ import annotations

__all__ = ["count"]


def count(n: int, noun: str, plural: str | None = None) -> str:
    """``n`` and ``noun``, the noun plural unless ``n`` is one (``plural`` for nouns
    that do not just take an "s").

    >>> count(1, "line"), count(0, "line"), count(3, "instruction")
    ('1 line', '0 lines', '3 instructions')
    >>> count(1, "match", "matches"), count(2, "match", "matches")
    ('1 match', '2 matches')
    """
    return f"{n} {noun if n == 1 else (plural or noun + 's')}"
