"""lakeFS's pagination: ``{results, pagination: {has_more, next_offset, results, max_per_page}}``.

A listing takes ``after`` (exclusive; the ``next_offset`` of the previous
page) and ``amount``, read by :meth:`~lakemount.api.context.Ctx.page_size` and
judged here, the same for every listing: none, 0 or less (lakeFS's -1) is the
default 100; more than 1000 is served as 1000, the ``max_per_page`` every page
states, as lakeFS's controller clamps it (an ``amount`` that is no integer is a 400).
A client asking for "everything" with -1 or with 100000000 gets a full page and
``has_more``, not one a 200 and the other a 400.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from itertools import islice
from typing import Any, Final, TypeVar

DEFAULT_AMOUNT: Final = 100
MAX_AMOUNT: Final = 1000

T = TypeVar("T")


def page_size(amount: int | None) -> int:
    """The page size a request's ``amount`` asks for: ``DEFAULT_AMOUNT`` for none or <= 0, at most ``MAX_AMOUNT``."""
    if amount is None or amount <= 0:
        return DEFAULT_AMOUNT
    return min(amount, MAX_AMOUNT)


def paginate(items: Iterable[T], n: int, key: Callable[[T], str], render: Callable[[T], Any]) -> dict[str, Any]:
    """One page of ``items`` (already positioned after ``after``): at most ``n`` (a :func:`page_size`) rendered results.

    ``next_offset`` is the key of the last result when there are more, else "".
    """
    taken = list(islice(iter(items), n + 1))
    more = len(taken) > n
    taken = taken[:n]
    return page([render(t) for t in taken], more, key(taken[-1]) if more and taken else "")


def page(results: list[Any], more: bool, next_offset: str) -> dict[str, Any]:
    """A page in lakeFS's shape: ``results`` and the ``pagination`` that says whether more follow after ``next_offset``."""
    return {
        "results": results,
        "pagination": {
            "has_more": more,
            "next_offset": next_offset if more else "",
            "results": len(results),
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
