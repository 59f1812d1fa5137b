"""Hard links: one file under several names, each name an ordinary entry.

A file with several names (``link(2)`` in the mount) is stored as one entry per
name, and the entries of one *link group* are identical: the same content
address (the data is stored once), size, ETag, mode, owner, mtime, metadata and
the same :attr:`Entry.link <lakemount.graveler.model.Entry.link>` field, which
names the group: a random id and every name of the group, sorted.  So every
front end that knows nothing of links (the S3 gateway, the API, diff, merge,
export) sees ordinary objects with the same content, a commit keeps the group
as it keeps any entry, and a read-only checkout of that commit shows it again.

A name is a *member* of its group only while its own entry is identical to the
others' and lists it: :func:`members` checks the listed names against what the
ref holds.  Whatever replaces or deletes one name without knowing of links (an
S3 PUT or DELETE, a merge that takes one side's entry) therefore takes that
name out of the group, as a copy-on-write would: the other names keep the file
and count one name less.  A group holds at most :data:`LINK_MAX` names, because
each entry carries them all (the bytes a group stages grow with the square of
its size).
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Iterable
from typing import Final, NamedTuple

from lakemount.graveler.model import Entry

LINK_MAX: Final = 256
"""The most names one file may have; one more is EMLINK."""

_SEP: Final = "\0"  # no path holds a NUL


class LinkGroup(NamedTuple):
    """The group an entry says it belongs to: its id and the names it lists (sorted)."""

    gid: str
    names: tuple[str, ...]


def new_group_id() -> str:
    """A fresh group id (64 random bits, hex)."""
    return secrets.token_hex(8)


def group_of(entry: Entry | None) -> LinkGroup | None:
    """The group ``entry`` names, or None for a file of one name."""
    if entry is None or not entry.link:
        return None
    gid, *names = entry.link.split(_SEP)
    return LinkGroup(gid, tuple(names))


def with_group(entry: Entry, gid: str, names: Iterable[str]) -> Entry:
    """``entry`` as the shared entry of group ``gid`` with ``names``; a group of one name is no group (link "")."""
    unique = sorted(set(names))
    if len(unique) <= 1:
        return entry._replace(link="")
    return entry._replace(link=_SEP.join((gid, *unique)))


def members(entry: Entry, path: str, lookup: Callable[[str], Entry | None]) -> tuple[str, ...]:
    """The names of the file ``entry`` found at ``path``, ``path`` included (sorted).

    ``lookup`` reads another name's entry from the same ref.  A listed name
    counts only if its entry is identical to ``entry``; an entry that does not
    list its own path (a copy made by a front end that knows nothing of links)
    is a file of one name.
    """
    group = group_of(entry)
    if group is None or path not in group.names:
        return (path,)
    return tuple(name for name in group.names if name == path or lookup(name) == entry)
