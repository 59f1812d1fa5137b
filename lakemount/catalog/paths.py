"""Which object keys a directory tree can show: the one rule every front end applies.

S3 accepts any key; a POSIX directory cannot show every key.  A key is
*showable* when it splits on ``/`` into segments that are each a valid file
name: no empty segment (a leading ``/``, ``a//b``), no ``.`` or ``..``, none
longer than 255 bytes (NAME_MAX), no NUL.  A trailing ``/`` is allowed only for
a directory marker (a key ending in ``/`` whose entry is a directory, as the
mount and the gateway write for empty directories); an *object* named
``trail/`` is not showable.  The CLI refuses unshowable paths at upload; the
S3 gateway accepts what S3 accepts; the mount hides unshowable keys (they are
never listed, never looked up, never deleted by ``rmdir``) and counts them in
``.lakefs/status``; ``fs download -r`` and ``export`` skip them with a warning.
See docs/SEMANTICS.md, "Keys a directory cannot show".
"""

from __future__ import annotations

from typing import Final

NAME_MAX: Final = 255


def segment_problem(segment: str) -> str | None:
    """Why ``segment`` cannot be a file name (None if it can)."""
    if segment == "":
        return "an empty path segment (a leading '/' or '//')"
    if segment in (".", ".."):
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
