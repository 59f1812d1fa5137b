"""Directory listings of a mounted ref: children with their kinds and entries, in one pass.

A directory is a key prefix ending in ``/``.  Its children are the keys right
below it (files, symlinks) and the next-level prefixes (subdirectories); an
*explicit* directory also has a marker key (the prefix itself, e.g. ``a/b/``)
whose entry holds its mode, owner and times, while an *implicit* one exists only
because keys lie below it.  :func:`list_dir` walks the catalog's ordered scan and
returns each subdirectory together with its marker entry, jumping over the
subtree when it is large, so listing a directory costs one scan plus one seek
per big subdirectory.  Keys a directory cannot show (``lakemount.catalog.paths``:
``/leading``, ``a//b``, ``a/../b``, a segment over 255 bytes, an object named
``trail/`` that is not a directory marker) are hidden the same way everywhere:
never listed, never found by lookup, and a directory whose keys are all hidden
does not exist (so ``rmdir`` never deletes an object); ``.lakefs/status`` counts
them, and the keys that the control directory ``.lakefs`` covers at a ref's root.  When a file and a directory share a name (keys ``a`` and ``a/b``), the
directory wins.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final

from lakemount.catalog.catalog import Catalog
from lakemount.catalog.model import Entry, ResolvedRef, decode_value, prefix_end

# Keys of one subdirectory skipped one by one before seeking past the rest.
SKIP_BEFORE_SEEK: Final = 16
# A POSIX file name's limit in bytes (segments longer than this are hidden).
NAME_MAX: Final = 255
# Hidden keys ``.lakefs/status`` names (it counts them all).
HIDDEN_EXAMPLES: Final = 20


class ChildKind(enum.Enum):
    """What a directory child is: a file, a directory or a symlink."""

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
    puts: int = 0  # names this mount added or changed in it since it was listed (``Tree.listing_put``)
    # What the listing decoded: name -> (the stored value, its child), as :func:`list_dir` read them (local
    # changes do not touch it).  The next listing of the directory reuses a child whose value is unchanged.
    decoded: dict[bytes, tuple[bytes, Child]] = field(default_factory=dict)
    # The branch's node stamp noted before the read (``OwnChanges.note``; None: not kept on stamps), and
    # when the read was: past ``head_ttl`` the listing is kept while only this mount changed the branch.
    stamp: tuple[int, int] | None = None
    listed: float = 0.0

    def __post_init__(self) -> None:
        if self.dirs < 0:
            self.dirs = sum(1 for c in self.children.values() if c.kind is ChildKind.DIR)


def child_for_entry(entry: Entry) -> Child:
    """The child a key without trailing slash stands for."""
    if entry.is_symlink:
        return Child(ChildKind.SYMLINK, entry)
    return Child(ChildKind.FILE, entry)


def valid_name(name: bytes) -> bool:
    """True if ``name`` can be one entry of a POSIX directory (the segment rule of ``catalog.paths``)."""
    return bool(name) and len(name) <= NAME_MAX and name not in (b".", b"..") and b"\x00" not in name


def showable_below(rest: bytes, value: bytes) -> bool:
    """True if a key ``rest`` below a shown directory can itself be shown (its value decides for ``x/``)."""
    if rest.endswith(b"/"):
        if not decode_value(value).is_dir:
            return False
        rest = rest[:-1]
    return all(valid_name(seg) for seg in rest.split(b"/"))


def dir_range(dir_path: str) -> tuple[bytes, bytes | None]:
    """The keys :func:`list_dir` scans first for directory ``dir_path`` (``Catalog.scans_ahead`` reads them ahead)."""
    prefix = (dir_path + "/").encode("utf-8", "surrogateescape") if dir_path else b""
    return prefix, prefix_end(prefix) if prefix else None


def list_dir(catalog: Catalog, repo: str, ref: ResolvedRef, dir_path: str,
             decoded: dict[bytes, tuple[bytes, Child]] | None = None,
             known: Mapping[bytes, tuple[bytes, Child]] | None = None) -> tuple[dict[bytes, Child], Entry | None]:
    """Children of directory ``dir_path`` ("" for the root) and the directory's own marker entry.

    ``decoded``, when given, receives each file or symlink child with the stored value it was
    decoded from; ``known`` is such a map of an earlier listing: a name whose value is unchanged
    takes its child from there instead of being decoded again (a directory relisted every
    ``head_ttl`` while a copy writes into it decodes only what is new).

    Raises what the catalog raises (``NotFound`` for a vanished ref,
    ``Unavailable`` for an unreachable store).
    """
    prefix, stop = dir_range(dir_path)
    children: dict[bytes, Child] = {}
    known = known if known is not None else {}
    own_marker: Entry | None = None
    start = prefix
    while True:
        reseek: bytes | None = None
        current_dir: bytes | None = None
        shown = False  # has current_dir a key that can be shown (so it exists)?
        skipped = 0
        for key, value in catalog.scan_records(repo, ref, start, stop):
            rest = key[len(prefix) :]
            slash = rest.find(b"/")
            if slash < 0:
                if not rest:
                    marker = decode_value(value)
                    if marker.is_dir:
                        own_marker = marker
                    continue
                seen = known.get(rest)
                if seen is not None and seen[0] == value:  # a name in ``known`` passed valid_name there
                    child = seen[1]
                elif valid_name(rest):
                    child = child_for_entry(decode_value(value))
                else:
                    continue
                children[rest] = child
                if decoded is not None:
                    decoded[rest] = (value, child)
                continue
            name = rest[:slash]
            if name != current_dir:
                current_dir, skipped, shown = name, 0, False
                if not valid_name(name):
                    shown = True  # never shown: skip it like a shown one
                    continue
            elif shown:
                skipped += 1
                if skipped > SKIP_BEFORE_SEEK:
                    reseek = prefix_end(prefix + name + b"/")
                    break
                continue
            if not showable_below(rest[slash + 1 :], value) if slash < len(rest) - 1 else not decode_value(value).is_dir:
                continue  # a hidden key: it does not make the directory exist
            shown = True
            # Keys sort the marker "name/" before anything below it.
            marker_entry = decode_value(value) if slash == len(rest) - 1 else None
            children[name] = Child(ChildKind.DIR, marker_entry)
        if reseek is None:
            return children, own_marker
        start = reseek


def lookup_child(catalog: Catalog, repo: str, ref: ResolvedRef, path: str) -> Child | None:
    """What ``path`` is in the ref (a directory wins over a file of the same name), by point queries.

    Agrees with :func:`list_dir`: a directory exists only through a key below it
    that can be shown (its directory marker or a showable key).
    """
    dir_key = (path + "/").encode("utf-8", "surrogateescape")
    stop = prefix_end(dir_key)
    own, record = catalog.lookup_first(repo, ref, path, dir_key, stop)
    # First live records only: a directory whose files were renamed away is staged deletions, and a
    # lookup of it (or of a parent) would otherwise read past each of them.
    while record is not None:
        key, value = record
        rest = key[len(dir_key) :]
        if not rest:
            marker = decode_value(value)
            if marker.is_dir:
                return Child(ChildKind.DIR, marker)
        elif showable_below(rest, value):
            return Child(ChildKind.DIR, None)
        record = catalog.first_record(repo, ref, key + b"\x00", stop)
    return None if own is None else child_for_entry(decode_value(own))


def count_hidden(catalog: Catalog, repo: str, ref: ResolvedRef, limit: int, reserved: str) -> tuple[int, list[str], bool]:
    """Keys of the ref the mount does not show: (count, the first few, complete).

    Those a directory cannot show (``catalog.paths``), and those the ref root's
    ``reserved`` name (the control directory) covers: the key ``reserved`` and
    every key below ``reserved/`` (S3 and the API accept them, as lakeFS does).
    Examples are printable (``catalog.paths.printable``).  Looks at no more than
    ``limit`` keys; ``complete`` is False when it stopped there.
    """
    from lakemount.catalog.paths import path_problem, printable

    count, seen = 0, 0
    examples: list[str] = []
    for key, value in catalog.scan_records(repo, ref, b"", None):
        seen += 1
        if seen > limit:
            return count, examples, False
        text = key.decode("utf-8", "surrogateescape")
        if (
            text == reserved
            or text.startswith(reserved + "/")
            or path_problem(text, is_dir_marker=text.endswith("/") and decode_value(value).is_dir) is not None
        ):
            count += 1
            if len(examples) < HIDDEN_EXAMPLES:
                examples.append(printable(text))
    return count, examples, True


def has_children(catalog: Catalog, repo: str, ref: ResolvedRef, path: str, ignore: frozenset[bytes] = frozenset()) -> bool:
    """True if any key other than the directory's marker (and ``ignore``) lies below ``path``.

    Hidden keys count (``rmdir`` never deletes an object), and so does an object
    named ``path/`` that is not a directory marker.
    """
    dir_key = (path + "/").encode("utf-8", "surrogateescape") if path else b""
    stop = prefix_end(dir_key) if dir_key else None
    start = dir_key
    # First live keys only (``Catalog.first_record``): the files renamed or removed from the directory
    # before are staged deletions, and an rmdir would otherwise read past each of them.
    while (record := catalog.first_record(repo, ref, start, stop)) is not None:
        key, value = record
        if key not in ignore and (key != dir_key or not decode_value(value).is_dir):
            return True
        start = key + b"\x00"
    return False
