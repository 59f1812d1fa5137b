"""``lakemount diff``: differences between refs, or a branch's uncommitted changes."""

from __future__ import annotations

from collections import Counter

import click

from lakemount.catalog import shapes
from lakemount.cli.common import ctx_obj, emit, json_option, parse_uri
from lakemount.errors import InvalidArgument

_HINT = "to see the changes under a path use --prefix PATH"
_SIGN = {"added": "+", "removed": "-", "changed": "~", "conflict": "!"}


@click.command("diff")
@click.argument("left")
@click.argument("right", required=False)
@click.option("--two-way", is_flag=True, help="Compare LEFT and RIGHT directly instead of RIGHT's changes since their merge base.")
@click.option("--prefix", default="", help="Only paths under this prefix.")
@json_option
def diff(left: str, right: str | None, two_way: bool, prefix: str) -> None:
    """Show changes.

    With one branch URI: its uncommitted changes.  With two refs: by default what
    merging RIGHT into LEFT would change (three-way, conflicts marked '!');
    with --two-way, every difference between LEFT and RIGHT.
    """
    lu = parse_uri(left, need_ref=True, path_hint=_HINT)
    g = ctx_obj().app.catalog
    assert lu.ref
    if right is None:
        recs = list(g.diff_uncommitted(lu.repo, lu.ref, prefix=prefix))
    else:
        ru = parse_uri(right, need_ref=True, path_hint=_HINT)
        assert ru.ref
        if ru.repo != lu.repo:
            raise InvalidArgument("both refs must be in the same repository")
        if two_way:
            recs = list(g.diff(lu.repo, lu.ref, ru.ref, prefix=prefix))
        else:
            recs = [r for r in g.diff_three_way(lu.repo, lu.ref, ru.ref) if r.path.startswith(prefix)]
    rows = []
    for r in recs:
        rows.append(shapes.diff_json(r.kind, r.path, size_bytes=r.size))
    lines = [f"{_SIGN[str(x['type'])]} {x['type']:<8} {x['path']}" for x in rows]
    emit(rows, [*lines, _summary(rows)] if rows else ["No changes"])


def _summary(rows: list[dict[str, object]]) -> str:
    """``3 changes: 1 added, 1 removed, 1 changed`` (kinds in a fixed order, only those present)."""
    counts = Counter(str(x["type"]) for x in rows)
    kinds = ", ".join(f"{counts[k]} {k}" for k in _SIGN if counts[k])
    return f"{len(rows)} change{'s' if len(rows) != 1 else ''}: {kinds}"


COMMANDS = [diff]
