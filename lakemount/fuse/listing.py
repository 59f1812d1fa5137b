"""Directory listings of a mounted ref: children with their kinds and entries, in one pass.

A directory is a key prefix ending in ``/``.  Its children are the keys right
below it (files, symlinks) and the next-level prefixes (subdirectories); an
*explicit* directory also has a marker key (the prefix itself, e.g. ``a/b/``)
whose entry holds its mode, owner and times, while an *implicit* one exists only
because keys lie below it.  :func:`list_dir` walks the catalog's ordered scan and
returns each subdirectory together with its marker entry, jumping over the
subtree when it is large, so listing a directory costs one scan plus one seek
per big subdirectory.  Names that cannot appear in a POSIX directory (empty,
``.``, ``..``, from keys such as ``a//b``) are skipped.  When a file and a
directory share a name (keys ``a`` and ``a/b``), the directory wins.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Final

from lakemount.catalog.catalog import Catalog
from lakemount.catalog.model import Entry, ResolvedRef, decode_value, prefix_end

# Keys of one subdirectory skipped one by one before seeking past the rest.
SKIP_BEFORE_SEEK: Final = 16


class ChildKind(enum.Enum):
    FILE = "file"
    DIR = "dir"
    SYMLINK = "symlink"


@dataclass(frozen=True, slots=True)
class Child:
    """One name in a directory: its kind and entry (for a directory: the marker, or None if implicit)."""

    kind: ChildKind
    entry: Entry | None


@dataclass(slots=True)
class Listing:
    """The children of one directory at one moment (``fetched``, monotonic) and scope generation.

    ``dirs`` counts the children that are directories (a directory's link
    count is 2 plus that number); whoever changes ``children`` keeps it true.
    """

    children: dict[bytes, Child]
    names: list[bytes]
    fetched: float
    gen: int
    dirs: int = -1

    def __post_init__(self) -> None:
        if self.dirs < 0:
            self.dirs = sum(1 for c in self.children.values() if c.kind is ChildKind.DIR)


def child_for_entry(entry: Entry) -> Child:
    """The child a key without trailing slash stands for."""
    if entry.is_symlink:
        return Child(ChildKind.SYMLINK, entry)
    return Child(ChildKind.FILE, entry)


def valid_name(name: bytes) -> bool:
    return bool(name) and name not in (b".", b"..") and b"\x00" not in name


def list_dir(catalog: Catalog, repo: str, ref: ResolvedRef, dir_path: str) -> tuple[dict[bytes, Child], Entry | None]:
    """Children of directory ``dir_path`` ("" for the root) and the directory's own marker entry.

    Raises what the catalog raises (``NotFound`` for a vanished ref,
    ``Unavailable`` for an unreachable store).
    """
    prefix = (dir_path + "/").encode("utf-8", "surrogateescape") if dir_path else b""
    stop = prefix_end(prefix) if prefix else None
    children: dict[bytes, Child] = {}
    own_marker: Entry | None = None
    start = prefix
    while True:
        reseek: bytes | None = None
        current_dir: bytes | None = None
        skipped = 0
        for key, value in catalog.scan_records(repo, ref, start, stop):
            rest = key[len(prefix) :]
            slash = rest.find(b"/")
            if slash < 0:
                if not rest:
                    own_marker = decode_value(value)
                elif valid_name(rest):
                    children[rest] = child_for_entry(decode_value(value))
                continue
            name = rest[:slash]
            if name == current_dir:
                skipped += 1
                if skipped > SKIP_BEFORE_SEEK:
                    reseek = prefix_end(prefix + name + b"/")
                    break
                continue
            current_dir, skipped = name, 0
            if valid_name(name):
                # Keys sort the marker "name/" before anything below it.
                marker = decode_value(value) if slash == len(rest) - 1 else None
                children[name] = Child(ChildKind.DIR, marker)
        if reseek is None:
            return children, own_marker
        start = reseek


def lookup_child(catalog: Catalog, repo: str, ref: ResolvedRef, path: str) -> Child | None:
    """What ``path`` is in the ref (a directory wins over a file of the same name), by point queries."""
    dir_key = (path + "/").encode("utf-8", "surrogateescape")
    for key, value in catalog.scan_records(repo, ref, dir_key, prefix_end(dir_key)):
        return Child(ChildKind.DIR, decode_value(value) if key == dir_key else None)
    entry = catalog.get_optional(repo, ref, path)
    return None if entry is None else child_for_entry(entry)


def has_children(catalog: Catalog, repo: str, ref: ResolvedRef, path: str, ignore: frozenset[bytes] = frozenset()) -> bool:
    """True if any key other than the directory's marker (and ``ignore``) lies below ``path``."""
    dir_key = (path + "/").encode("utf-8", "surrogateescape") if path else b""
    stop = prefix_end(dir_key) if dir_key else None
    return any(key != dir_key and key not in ignore for key, _value in catalog.scan_records(repo, ref, dir_key, stop))
