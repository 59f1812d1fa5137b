"""GC's three moves on one object: into the trash, back out of it, and out of existence.

A sweep never deletes a candidate: :func:`trash` moves it to its trash key
(``lakemount.block.trash`` defines the layout, and lets readers find it
there).  Jobs reach these moves through ``Catalog.gc_store`` only
(``lakemount.catalog.gcstore``); they live here, with the block stores,
because a move on the local store is a rename of the file itself.  A later run puts a trashed object back when something references
it again (:func:`restore`) and deletes it for good only when it is still
unreferenced and was trashed before that run's cutoff (:func:`purge`).

Each move re-checks the store right before acting, because the mark that
chose it is seconds to hours old.  On the local store a move is one
``rename``, and the time that decides is read *after* it, which leaves no
window for a concurrent ``touch``.  On S3 the time is read first and the
move is a server-side copy followed by a delete: a ``touch`` landing between
the two may still see the original trashed, which is the window the trash
exists for.  The trashed copy's modification time is the time it was
trashed (S3 gives a copy its own time; locally it is set after the rename),
which is what :func:`purge` compares with the cutoff.

Every function returns ``(outcome, bytes)`` and, with ``dry_run``, only says
what it would do.  Outcomes: ``trashed``, ``touched`` (modified since the
cutoff: kept where it is), ``restored``, ``purged``, ``recent`` (trashed too
recently to purge: left in the trash), ``already_gone`` (someone was first:
an earlier attempt of the same sweep, or a restore).
"""

from __future__ import annotations

import contextlib
import os
import secrets
from typing import Final

from lakemount.block.local import TEMP_PREFIX, LocalAdapter
from lakemount.block.trash import trash_key
from lakemount.errors import InvalidArgument, ObjectNotFound
from lakemount.graveler.committed.store import join
from lakemount.graveler.ports import BlockAdapter

LOCAL: Final = "local://"


def _urls(namespace: str, key: str) -> tuple[str, str]:
    trashed = trash_key(key)
    if trashed is None:
        raise InvalidArgument(f"GC only moves data objects and tables, not {key!r}")
    return join(namespace, key), join(namespace, trashed)


def trash(adapter: BlockAdapter, namespace: str, key: str, cutoff: float, *, dry_run: bool) -> tuple[str, int]:
    """Move the object ``key`` of ``namespace`` to the trash unless it was modified at or after ``cutoff``.

    On the local store: rename first, then judge the time.  A writer's
    ``touch`` either came before the rename (the time is new: the file goes
    back; objects are content-addressed, so putting it back over a
    concurrent re-upload changes no byte) or after it (the touch fails, and
    the writer uploads the bytes again).  Readers find the file under one of
    the two names at every moment.
    """
    url, dest = _urls(namespace, key)
    if not dry_run and url.startswith(LOCAL):
        dest_path = LocalAdapter.path_of(dest)
        os.makedirs(os.path.dirname(dest_path), exist_ok=True)
        size = _move_if_old(LocalAdapter.path_of(url), dest_path, cutoff)
        if size is not None and size >= 0:
            os.utime(dest_path)  # from now on its time is the time it was trashed
        return _outcome(size, "trashed", "touched")
    size = _size_if_old(adapter, url, cutoff)
    if not dry_run and size is not None and size >= 0:
        try:
            adapter.copy(url, dest)
        except ObjectNotFound:
            return "already_gone", 0
        adapter.delete(url)
    return _outcome(size, "trashed", "touched")


def _outcome(size: int | None, done: str, kept: str) -> tuple[str, int]:
    """The ``(outcome, bytes)`` of a move judged by ``_move_if_old`` or ``_size_if_old``."""
    if size is None:
        return "already_gone", 0
    if size < 0:
        return kept, 0
    return done, size


def _size_if_old(adapter: BlockAdapter, url: str, cutoff: float) -> int | None:
    """``_move_if_old``'s answer without moving: for stores where a move is a copy and a delete."""
    try:
        info = adapter.stat(url)
    except ObjectNotFound:
        return None
    return -1 if info.mtime >= cutoff else info.size


def _move_if_old(path: str, dest: str, cutoff: float) -> int | None:
    """Rename ``path`` to ``dest``, then read its time: modified at or after ``cutoff``, it goes back.

    Returns the size moved, -1 if the file was put back, None if ``path`` was
    missing.  Renaming before reading the time is what leaves no window for a
    concurrent ``touch`` (which fails once the file has moved).
    """
    try:
        os.rename(path, dest)
    except FileNotFoundError:
        return None
    st = os.stat(dest)
    if st.st_mtime >= cutoff:
        os.rename(dest, path)
        return -1
    return st.st_size


def restore(adapter: BlockAdapter, namespace: str, key: str, *, dry_run: bool) -> tuple[str, int]:
    """Move the trashed copy of ``key`` back to ``key`` (just drop it if ``key`` holds the bytes again)."""
    url, src = _urls(namespace, key)
    if not dry_run and url.startswith(LOCAL):
        path, trashed = LocalAdapter.path_of(url), LocalAdapter.path_of(src)
        try:
            size = os.stat(trashed).st_size
            os.makedirs(os.path.dirname(path), exist_ok=True)
            # Over a re-uploaded original, the rename changes no byte (content-addressed).
            os.rename(trashed, path)
        except FileNotFoundError:
            return "already_gone", 0
        return "restored", size
    try:
        info = adapter.stat(src)
    except ObjectNotFound:
        return "already_gone", 0
    if not dry_run:
        if not adapter.exists(url):
            try:
                adapter.copy(src, url)
            except ObjectNotFound:
                return "already_gone", 0
        adapter.delete(src)
    return "restored", info.size


def purge(adapter: BlockAdapter, namespace: str, key: str, cutoff: float, *, dry_run: bool) -> tuple[str, int]:
    """Delete the trashed copy of ``key`` for good, unless it was trashed at or after ``cutoff``.

    The caller has established that nothing references ``key``.  Locally the
    copy is renamed aside (``.tmp-`` names are never listed) before its time
    is read, as ``trash`` does, so a concurrent re-trash is never lost.
    """
    _url, src = _urls(namespace, key)
    if not dry_run and src.startswith(LOCAL):
        trashed = LocalAdapter.path_of(src)
        directory, name = os.path.split(trashed)
        aside = os.path.join(directory, f"{TEMP_PREFIX}gc-{secrets.token_hex(6)}-{name}")
        size = _move_if_old(trashed, aside, cutoff)
        if size is not None and size >= 0:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(aside)
        return _outcome(size, "purged", "recent")
    size = _size_if_old(adapter, src, cutoff)
    if not dry_run and size is not None and size >= 0:
        adapter.delete(src)
    return _outcome(size, "purged", "recent")
