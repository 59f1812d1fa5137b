"""The first live staged key of a range across several tokens, from each token's own first live key.

A branch's staging is its current token over its sealed ones (commits in flight), newest
first; a key's staged state is its newest entry among them.  ``StagingStore.staged_first``
asks for the first key whose newest entry is a value: each backend finds one token's first
value past any run of tombstones (``lm_staging_live``, an index of values only, for ``sql``),
and :func:`first_of` combines the tokens.  A key a newer token deletes is stepped over one at a
time, which only a key staged in an older token and deleted in a newer one costs (rare: a
branch has one token but while a commit runs).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from lakemount.graveler.model import StagingToken

# (token, start, stop) -> the token's first (key, value) with a value in [start, stop), or None.
FirstOne = Callable[[StagingToken, bytes, "bytes | None"], "tuple[bytes, bytes] | None"]
# (tokens, key) -> (found, value) of the newest entry of ``key`` among ``tokens``.
StagedGet = Callable[[Sequence[StagingToken], bytes], "tuple[bool, bytes | None]"]


def first_of(
    tokens: Sequence[StagingToken], start: bytes, stop: bytes | None, first_one: FirstOne, get: StagedGet
) -> tuple[bytes, bytes] | None:
    """The first key in [start, stop) whose newest entry among ``tokens`` is a value, with it; None if none.

    Every key below the smallest of the tokens' own first values has no value in any token (its
    newest entry is a tombstone, or it has none), so the answer is that smallest key if no newer
    token deletes it, else the answer past it.
    """
    if not tokens:
        return None
    if len(tokens) == 1:
        return first_one(tokens[0], start, stop)
    lower = start
    while True:
        found = [f for f in (first_one(t, lower, stop) for t in tokens) if f is not None]
        if not found:
            return None
        key = min(k for k, _ in found)
        _, value = get(tokens, key)
        if value is not None:
            return key, value
        lower = key + b"\x00"
