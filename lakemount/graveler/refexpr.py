"""Ref expressions: ``main``, ``v1``, ``a1b2c3``, ``main~2``, ``main^2``, ``main@``, ``main$``.

Parsed here into a base name and a list of navigation steps; resolved by the
Graveler facade (which knows branches, tags and commits).
"""

from __future__ import annotations

import re
from enum import Enum

from lakemount.errors import InvalidArgument
from lakemount.graveler.model import CommitID
from lakemount.records import record


class View(str, Enum):
    """What a ref expression reads: a branch's full state, a commit, or only a branch's staging."""

    FULL = "full"  # a branch: committed state plus staging (read-write)
    COMMITTED = "committed"  # an immutable commit (tags, ids, ~N, ^N, branch@)
    STAGING = "staging"  # branch$: only what is staged


@record(frozen=True, slots=True)
class RefExpr:
    """A parsed ref expression: ``base`` then ``~n``/``^n`` steps, then an optional ``@`` or ``$`` suffix."""

    base: str
    steps: tuple[tuple[str, int], ...]  # ("~", n) or ("^", n)
    suffix: str  # "", "@" or "$"


_STEP = re.compile(r"([~^])(\d*)")
_HEX = re.compile(r"[0-9a-f]+")


def is_hex(s: str) -> bool:
    """True when ``s`` is non-empty lowercase hex (a commit id or a prefix of one)."""
    return _HEX.fullmatch(s) is not None


def parse(expr: str) -> RefExpr:
    """Split an expression; raises ``InvalidArgument`` on a malformed one."""
    if not expr:
        raise InvalidArgument("empty ref")
    suffix = ""
    if expr[-1] in "@$":
        suffix, expr = expr[-1], expr[:-1]
    m = re.search(r"[~^]", expr)
    base, rest = (expr[: m.start()], expr[m.start() :]) if m else (expr, "")
    if not base or any(c in base for c in "@$ /"):
        raise InvalidArgument(f"malformed ref expression {expr + suffix!r}")
    steps: list[tuple[str, int]] = []
    pos = 0
    while pos < len(rest):
        sm = _STEP.match(rest, pos)
        if sm is None:
            raise InvalidArgument(f"malformed ref expression {expr + suffix!r}")
        steps.append((sm.group(1), int(sm.group(2)) if sm.group(2) else 1))
        pos = sm.end()
    if suffix and steps:
        raise InvalidArgument(f"'{suffix}' applies to a branch name only: {expr + suffix!r}")
    return RefExpr(base, tuple(steps), suffix)


@record(frozen=True, slots=True)
class ResolvedRef:
    """What a ref expression points at now."""

    expr: str
    kind: str  # "branch", "tag" or "commit"
    commit_id: CommitID
    view: View
    branch: str | None = None  # set when kind == "branch" and the view includes staging
    namespace: str = ""  # the repository's storage namespace when resolved (saves a lookup per read)

    @property
    def writable(self) -> bool:
        return self.view is View.FULL
