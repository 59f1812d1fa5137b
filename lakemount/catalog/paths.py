"""Which object keys a directory tree can show: the one rule every front end applies.

S3 accepts any key; a POSIX directory cannot show every key.  A key is
*showable* when it splits on ``/`` into segments that are each a valid file
name: no empty segment (a leading ``/``, ``a//b``), no ``.`` or ``..``, none
longer than 255 bytes (NAME_MAX), no NUL.  A trailing ``/`` is allowed only for
a directory marker (a key ending in ``/`` whose entry is a directory, as the
mount and the gateway write for empty directories); an *object* named
``trail/`` is not showable.  The CLI refuses unshowable paths at upload; the
S3 gateway accepts what S3 accepts but ``.`` and ``..`` segments (below); the mount hides unshowable keys (they are
never listed, never looked up, never deleted by ``rmdir``) and counts them in
``.lakefs/status``; ``fs download -r`` and ``export`` skip them with a warning.
See docs/SEMANTICS.md, "Keys a directory cannot show".

Separately, a key every front end can *write* is UTF-8 text
(:func:`key_problem`): the catalog refuses any other key at every entry (mount,
gateway, API, CLI, import), because S3 clients, JSON and the web UI cannot carry
one.  A key stored before that rule still lists everywhere, shown with :func:`printable` (each undecodable byte as
``\\xNN``), and the mount, which names it by its bytes, still reads, renames
and removes it.  Nor may any front end write a key with a ``.`` or ``..``
segment (:func:`dot_segment_problem`): the mount cannot show one, the API
refuses it, and an S3 client syncing such a key to disk can be led out of its
folder; the gateway refuses it too (``InvalidArgument``).  Reads and deletes
still take such a key, so one stored before the rule can be removed.
"""

from __future__ import annotations

from typing import Any, Final

NAME_MAX: Final = 255
DOT_SEGMENTS: Final = (".", "..")


def text_problem(text: str) -> str | None:
    """Why ``text`` (a key or a name, undecodable bytes held as surrogate escapes) is not UTF-8 text (None if it is)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return "a name that is not UTF-8 text"
    return None


def dot_segment_problem(path: str) -> str | None:
    """Why ``path`` is refused for naming a ``.`` or ``..`` segment (None if it names none)."""
    if any(seg in DOT_SEGMENTS for seg in path.split("/")):
        return "a '.' or '..' path segment"
    return None


def key_problem(path: str, max_bytes: int) -> str | None:
    """Why no front end may write the key ``path`` (None if it may): empty, not UTF-8, a ``.`` or ``..``
    segment, or over ``max_bytes``."""
    if path == "":
        return "an empty path"
    problem = text_problem(path) or dot_segment_problem(path)
    if problem is not None:
        return problem
    if len(path.encode("utf-8")) > max_bytes:
        return f"a path longer than {max_bytes} bytes"
    return None


def printable(text: str) -> str:
    """``text`` as UTF-8 text: each undecodable byte (a surrogate escape) shown as ``\\xNN``.

    How listings, JSON and XML show a key stored before :func:`key_problem`
    refused such keys; valid text comes back unchanged (the same object).
    """
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        try:
            raw = text.encode("utf-8", "surrogateescape")
        except UnicodeEncodeError:  # a lone surrogate that is no escaped byte (from JSON's \\udXXX)
            return text.encode("utf-8", "backslashreplace").decode("utf-8")
        return raw.decode("utf-8", "backslashreplace")
    return text


def printable_tree(value: Any) -> Any:
    """``value`` (a JSON document: dicts, lists, strings) with every string made :func:`printable`.

    What every JSON edge (the API, the CLI's ``--json``, the mount's control
    files) sends, so no document carries a lone ``\\udcXX`` escape.
    """
    if isinstance(value, str):
        return printable(value)
    if isinstance(value, dict):
        return {printable(k) if isinstance(k, str) else k: printable_tree(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [printable_tree(v) for v in value]
    return value


def printable_bytes(text: str) -> bytes:
    """``text`` encoded as UTF-8, undecodable bytes shown as by :func:`printable` (for XML and other documents)."""
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        return printable(text).encode("utf-8")


def segment_problem(segment: str) -> str | None:
    """Why ``segment`` cannot be a file name (None if it can)."""
    if segment == "":
        return "an empty path segment (a leading '/' or '//')"
    if segment in DOT_SEGMENTS:
        return f"a {segment!r} path segment"
    if "\x00" in segment:
        return "a NUL character"
    if len(segment.encode("utf-8", "surrogateescape")) > NAME_MAX:
        return f"a path segment longer than {NAME_MAX} bytes"
    return None


def path_problem(path: str, *, is_dir_marker: bool = False) -> str | None:
    """Why the key ``path`` cannot appear in a directory tree (None if it can).

    ``is_dir_marker``: the key's entry is a directory, so one trailing ``/`` is
    its marker form and allowed.
    """
    if path == "":
        return "an empty path"
    body = path
    if path.endswith("/"):
        if not is_dir_marker:
            return "a trailing '/' on an object that is not a directory marker"
        body = path[:-1]
    for seg in body.split("/"):
        problem = segment_problem(seg)
        if problem is not None:
            return problem
    return None


def is_showable(path: str, *, is_dir_marker: bool = False) -> bool:
    """True if ``path`` can appear in a directory tree (see :func:`path_problem`)."""
    return path_problem(path, is_dir_marker=is_dir_marker) is None
