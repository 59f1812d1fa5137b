"""lakeFS's pagination: ``{results, pagination: {has_more, next_offset, results, max_per_page}}``.

A listing takes ``after`` (exclusive; the ``next_offset`` of the previous
page) and ``amount`` (default 100, at most 1000; -1 and 0 mean the default).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from itertools import islice
from typing import Any, Final, TypeVar

DEFAULT_AMOUNT: Final = 100
MAX_AMOUNT: Final = 1000

T = TypeVar("T")


def page_size(amount: int | None) -> int:
    """The page size a request's ``amount`` asks for (clamped to ``MAX_AMOUNT``)."""
    if amount is None or amount <= 0:
        return DEFAULT_AMOUNT
    return min(amount, MAX_AMOUNT)


def paginate(items: Iterable[T], amount: int | None, key: Callable[[T], str], render: Callable[[T], Any]) -> dict[str, Any]:
    """One page of ``items`` (already positioned after ``after``): at most ``amount`` rendered results.

    ``next_offset`` is the key of the last result when there are more, else "".
    """
    n = page_size(amount)
    taken = list(islice(iter(items), n + 1))
    more = len(taken) > n
    taken = taken[:n]
    return {
        "results": [render(t) for t in taken],
        "pagination": {
            "has_more": more,
            "next_offset": key(taken[-1]) if more and taken else "",
            "results": len(taken),
            "max_per_page": MAX_AMOUNT,
        },
    }


def after_filter(items: Iterable[T], key: Callable[[T], str], *, prefix: str = "", after: str = "") -> Iterable[T]:
    """Items (sorted by ``key``) that start with ``prefix`` and sort after ``after``."""
    for it in items:
        k = key(it)
        if prefix and not k.startswith(prefix):
            continue
        if after and k <= after:
            continue
        yield it
