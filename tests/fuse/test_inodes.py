"""The inode table's names at or below a path (what a rename rekeys), against a walk of every key."""

from __future__ import annotations

import random
from types import SimpleNamespace

from lakemount.fuse.inodes import InodeTable, Kind, Node

SCOPES = [SimpleNamespace(key=("repo", "main")), SimpleNamespace(key=("repo", "dev"))]
PATHS = ["", "a", "a/b", "a/b/c", "a/bc", "a/b/c/d", "ab", "x/y/z", "x/y", "_temporary/0/task_1/p=1/f", "p=1"]


def walk(table: InodeTable, scope_key: object, path: str) -> list[tuple[str, Node]]:
    """``under`` as it was: every key of the table looked at."""
    prefix = path + "/" if path else ""
    return sorted(
        ((k[1], n) for k, n in table._by_key.items()
         if isinstance(k, tuple) and len(k) == 2 and k[0] == scope_key and n.scope is not None and n.scope.key == scope_key
         and n.kind in (Kind.DIR, Kind.FILE, Kind.SYMLINK) and (not path or k[1] == path or k[1].startswith(prefix))),
        key=lambda p: p[0],
    )


def test_under_finds_what_a_walk_of_every_key_finds_through_adds_renames_and_detaches() -> None:
    rng = random.Random(36)
    table = InodeTable()
    table.get_or_add(("repo", "repo"), kind=Kind.REPO, repo="repo")  # keys of other shapes are not names
    table.get_or_add(("ctl", SCOPES[0].key, "commit"), kind=Kind.CONTROL_FILE, scope=SCOPES[0], control="commit")
    for _step in range(3000):
        scope = rng.choice(SCOPES)
        path = rng.choice(PATHS) + rng.choice(["", "/n", "/m/k"])
        path = path.lstrip("/")
        nodes = [n for n in table.nodes() if n.scope is scope and n.kind != Kind.CONTROL_FILE and not n.detached]
        move = rng.random()
        if move < 0.5 or not nodes:
            table.get_or_add((scope.key, path), kind=rng.choice([Kind.DIR, Kind.FILE]), scope=scope, path=path)
        elif move < 0.8:
            node = rng.choice(nodes)
            table.rekey(node, (scope.key, path), path)
        else:
            table.detach(rng.choice(nodes))
        for probe in ("", "a", "a/b", "x", path):
            got = sorted(table.under(scope.key, probe), key=lambda p: p[0])
            assert got == walk(table, scope.key, probe), f"under({probe!r}) after {_step} steps"
    assert any(table.under(SCOPES[0].key, "a"))  # the run left names to find


def test_under_a_small_directory_looks_only_below_it() -> None:
    # 20,000 task directories, as a Spark job leaves them: the names under one of them are its own, found
    # through the directories above it, not by a walk of the 40,000 keys.
    table = InodeTable()
    scope = SCOPES[0]
    for i in range(20_000):
        for path in (f"t/task_{i}", f"t/task_{i}/part"):
            table.get_or_add((scope.key, path), kind=Kind.FILE if path.endswith("part") else Kind.DIR, scope=scope, path=path)
    assert table._by_key.names_under(scope.key, "t/task_7") == ["t/task_7", "t/task_7/part"]
    assert table._by_key.below[(scope.key, "t/task_7")] == {"t/task_7/part": 1}
    assert [name for name, _node in table.under(scope.key, "t/task_7")] == ["t/task_7", "t/task_7/part"]
