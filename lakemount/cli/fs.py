"""``lakemount fs``: list, read, write and delete objects by path."""

from __future__ import annotations

import contextlib
import io
import os
import posixpath
import sys
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, Final

import click

from lakemount.catalog import shapes
from lakemount.catalog.catalog import MAX_KEY_BYTES
from lakemount.catalog.paths import key_problem, path_problem, printable
from lakemount.cli.common import ctx_obj, emit, entry_json, iso, json_option, parse_uri, progress
from lakemount.errors import InvalidArgument, LakeMountError, NotFound, ObjectNotFound
from lakemount.private import user_makedirs, user_mode

if TYPE_CHECKING:
    from lakemount.catalog.catalog import Catalog
    from lakemount.catalog.model import Entry, ResolvedRef

# A single-file upload at least this large shows a progress bar in bytes (on a terminal).
BIG_FILE: Final = 8 << 20
# Symlinks followed by ``fs cat`` and ``fs download`` of one path before giving up (as Linux's MAXSYMLINKS).
MAX_SYMLINKS: Final = 40


@click.group("fs")
def fs() -> None:
    """Work with objects: ls, cat, stat, upload, download, rm."""


@fs.command("ls")
@click.argument("uri")
@click.option("--recursive", "-r", is_flag=True, help="List every object under the prefix.")
@json_option
def ls(uri: str, recursive: bool) -> None:
    """List objects and directories under URI (lakefs://REPO/REF[/PREFIX])."""
    u = parse_uri(uri, need_ref=True)
    assert u.ref
    prefix = u.path
    if prefix and not prefix.endswith("/"):
        prefix += "/"
    ctx_obj().acts_on(u.repo, "ls", u.ref, prefix)
    cat = ctx_obj().app.catalog
    resolved = cat.resolve(u.repo, u.ref)
    items = list(cat.list(u.repo, resolved, prefix, delimiter="" if recursive else "/"))
    ctx_obj().audit(u.repo, "ls", u.ref, prefix, commit=resolved.commit_id)
    rows = []
    lines = []
    for it in items:
        if it.entry is None:
            rows.append(shapes.prefix_json(it.path))
            lines.append(f"{'DIR':<8} {'':>12} {'':<25} {it.path}")
        else:
            rows.append(entry_json(it.path, it.entry))
            lines.append(f"{'object':<8} {it.entry.size:>12} {iso(it.entry.mtime_ns / 1e9):<25} {it.path}")
    emit(rows, lines)


@fs.command("cat")
@click.argument("uri")
@json_option
def cat_(uri: str) -> None:
    """Write an object's content to stdout (a symlink written through the mount is followed).

    With --json: the object's stats and its content (``content`` as text, or
    ``content_base64`` when it is not UTF-8).
    """
    u = parse_uri(uri, need_ref=True, need_path=True)
    assert u.ref
    ctx_obj().acts_on(u.repo, "cat", u.ref, u.path)
    c = ctx_obj().app.catalog
    ref = c.resolve(u.repo, u.ref)
    path, e = _follow(c, u.repo, ref, u.path)
    if e.is_dir:
        raise InvalidArgument(f"{u} is a directory")
    repo = c.repository(u.repo)
    ctx_obj().audit(u.repo, "cat", u.ref, path, nbytes=e.size, commit=ref.commit_id)
    if ctx_obj().as_json:
        data = c.read(repo, e)
        out: dict[str, object] = entry_json(path, e)
        try:
            out["content"] = data.decode("utf-8")
        except UnicodeDecodeError:
            import base64

            out["content_base64"] = base64.b64encode(data).decode()
        emit(out)
        return
    stdout = sys.stdout.buffer
    with c.open(repo, e) as f:
        while chunk := f.read(4 * 1024 * 1024):
            stdout.write(chunk)
    stdout.flush()


def _follow(c: Catalog, repo: str, ref: ResolvedRef, path: str) -> tuple[str, Entry]:
    """The entry at ``path`` after following symlinks (relative to the link's directory, within the ref).

    ``ObjectNotFound`` for a missing path or dangling link; ``InvalidArgument``
    for a link that leaves the repository or loops.
    """
    for _ in range(MAX_SYMLINKS):
        e = c.get_optional(repo, ref, path)
        if e is None:
            marker = c.get_optional(repo, ref, path.rstrip("/") + "/")
            if marker is not None and marker.is_dir:
                return path, marker
            raise ObjectNotFound(f"{repo}/{ref.expr}/{path}")
        if not e.is_symlink:
            return path, e
        target = e.target
        if target.startswith("/"):
            raise InvalidArgument(f"{path} is a symlink to the absolute path {target!r}, outside the repository")
        joined = posixpath.normpath(posixpath.join(posixpath.dirname(path), target))
        if joined in (".", "") or joined.startswith("../") or joined == "..":
            raise InvalidArgument(f"{path} is a symlink to {target!r}, outside the repository")
        path = joined
    raise InvalidArgument(f"{path}: too many levels of symbolic links")


@fs.command("stat")
@click.argument("uri")
@json_option
def stat_(uri: str) -> None:
    """Show an object's metadata."""
    u = parse_uri(uri, need_ref=True, need_path=True)
    assert u.ref
    ctx_obj().acts_on(u.repo, "stat", u.ref, u.path)
    resolved = ctx_obj().app.catalog.resolve(u.repo, u.ref)
    e = ctx_obj().app.catalog.stat(u.repo, resolved, u.path)
    ctx_obj().audit(u.repo, "stat", u.ref, u.path, commit=resolved.commit_id)
    j = entry_json(u.path, e)
    emit(j, [f"{k.replace('_', ' ').capitalize() + ':':<20}{v}" for k, v in j.items()])


@fs.command("upload")
@click.argument("uri")
@click.option("--source", "-s", required=True, type=click.Path(exists=True), help="Local file (or directory with -r).")
@click.option("--recursive", "-r", is_flag=True, help="Upload a directory tree under the URI's path.")
@click.option("--content-type", default=None, help="Content type (default: guessed from the name).")
@json_option
def upload(uri: str, source: str, recursive: bool, content_type: str | None) -> None:
    """Upload SOURCE to URI (lakefs://REPO/BRANCH/PATH) as an uncommitted change."""
    u = parse_uri(uri, need_ref=True)
    assert u.ref
    ctx_obj().acts_on(u.repo, "upload", u.ref, u.path)
    c = ctx_obj().app.catalog
    if os.path.isdir(source):
        if not recursive:
            raise InvalidArgument(f"{source} is a directory: use --recursive")
        files = []
        for root, _dirs, names in os.walk(source):
            for n in sorted(names):
                full = os.path.join(root, n)
                files.append((full, os.path.relpath(full, source).replace(os.sep, "/")))
        base = u.path.rstrip("/") + "/" if u.path else ""
        for _full, rel in files:
            _check_upload_path(base + rel)
        ref = c.resolve(u.repo, u.ref)
        done = []
        import mimetypes  # an upload's only: fs ls and fs cat do not load its tables

        with progress(len(files), "upload", "file") as bar:
            try:
                for full, rel in files:
                    e = c.put(u.repo, ref, base + rel, full, content_type=content_type or mimetypes.guess_type(rel)[0] or "")
                    done.append(entry_json(base + rel, e))
                    bar.update(1)
            except KeyboardInterrupt:
                # What was uploaded is staged and stays so: say how much, and how to see or drop it.
                branch = f"lakefs://{u.repo}/{u.ref}"
                raise KeyboardInterrupt(
                    f"interrupted after uploading {len(done)} of {len(files)} files to {u}: those are staged "
                    f"(uncommitted), the rest are not; 'lakemount diff {branch}' lists them, "
                    f"'lakemount reset {u}' drops them"
                ) from None
        ctx_obj().audit(u.repo, "upload", u.ref, base, nbytes=sum(int(d["size_bytes"]) for d in done),
                        commit=ref.commit_id, detail=f'{{"files": {len(done)}}}')
        emit(done, f"Uploaded {len(done)} files to {u}")
        return
    if not u.path:
        raise InvalidArgument("upload needs a destination path: lakefs://REPO/BRANCH/PATH")
    _check_upload_path(u.path)
    import mimetypes

    kind = content_type or mimetypes.guess_type(u.path)[0] or ""
    size = os.path.getsize(source)
    if size < BIG_FILE:
        e = c.put(u.repo, u.ref, u.path, source, content_type=kind)
    else:
        with progress(size, "upload", "B") as bar, _Counted(source, bar.update) as f:
            e = c.put(u.repo, u.ref, u.path, f, content_type=kind)
    ctx_obj().audit(u.repo, "upload", u.ref, u.path, nbytes=e.size)
    emit(entry_json(u.path, e), f"Path: {u.path}\nSize: {e.size} bytes\nChecksum: {e.etag}")


class _Counted(io.FileIO):
    """A local file opened for reading whose reads are counted by ``count`` (a progress bar's ``update``)."""

    def __init__(self, path: str, count: Callable[[int], object]) -> None:
        super().__init__(path, "rb")
        self.count = count

    def read(self, n: int | None = -1) -> bytes:
        """Read like ``FileIO.read`` and count the bytes read."""
        data = super().read(n) or b""
        self.count(len(data))
        return data


def _check_upload_path(path: str) -> None:
    """``InvalidArgument`` for a path no front end may write or a directory cannot show (see ``lakemount.catalog.paths``)."""
    problem = key_problem(path, MAX_KEY_BYTES)
    if problem is not None:
        raise InvalidArgument(f"refusing to upload to '{printable(path)}': {problem}")
    problem = path_problem(path)
    if problem is not None:
        raise InvalidArgument(
            f"refusing to upload to {path!r}: {problem}; the mount could not show it (docs/SEMANTICS.md)"
        )


@fs.command("download")
@click.argument("uri")
@click.argument("dest", type=click.Path())
@click.option("--recursive", "-r", is_flag=True, help="Download everything under the URI's prefix.")
@json_option
def download(uri: str, dest: str, recursive: bool) -> None:
    """Download URI (lakefs://REPO/REF/PATH) to local DEST.

    With --recursive, nothing is ever written outside DEST: a key that would
    land elsewhere (``../x``, ``/x``, ``a//b``) or that a directory cannot show
    is skipped with a warning naming it, the rest is downloaded, and the exit
    status is non-zero.  Directory markers become empty directories and
    symlinks are recreated when their target stays inside DEST (else skipped
    with a warning).  One failing entry never stops the others.
    """
    u = parse_uri(uri, need_ref=True)
    assert u.ref
    c = ctx_obj().app.catalog
    repo = c.repository(u.repo)
    ref = c.resolve(u.repo, u.ref)

    def fetch(e: Entry, target: str) -> int:
        user_makedirs(os.path.dirname(os.path.abspath(target)))
        tmp = target + ".lm-part"
        try:
            with c.open(repo, e) as src, open(tmp, "wb") as out:
                # The user's file, not lakemount's: the user's umask, not the private one.
                os.fchmod(out.fileno(), user_mode(0o666))
                while chunk := src.read(4 * 1024 * 1024):
                    out.write(chunk)
            os.replace(tmp, target)
        finally:
            if os.path.lexists(tmp):
                os.unlink(tmp)
        return e.size

    if recursive:
        prefix = u.path.rstrip("/") + "/" if u.path else ""
        items = [it for it in c.list(u.repo, ref, prefix) if it.entry is not None]
        user_makedirs(dest)
        root = os.path.realpath(dest)
        total = files = dirs = links = 0
        skipped: list[dict[str, str]] = []

        def skip(path: str, reason: str) -> None:
            skipped.append({"path": path, "reason": reason})
            click.echo(f"warning: skipped {path!r}: {reason}", err=True)

        with progress(len(items), "download", "file") as bar, _interrupted_download(items, dest, lambda: files):
            for it in items:
                bar.update(1)
                e = it.entry
                assert e is not None
                rel = it.path[len(prefix) :]
                if rel == "" and e.is_dir:
                    continue  # the marker of the downloaded directory itself
                problem = path_problem(rel, is_dir_marker=e.is_dir)
                if problem is not None:
                    skip(it.path, f"not a path inside DEST: {problem}")
                    continue
                target = os.path.join(root, *rel.rstrip("/").split("/"))
                if not _inside(root, os.path.dirname(target)):
                    skip(it.path, "its directory leads outside DEST through a symlink")
                    continue
                try:
                    if e.is_dir:
                        user_makedirs(target)
                        dirs += 1
                    elif e.is_symlink:
                        resolved = os.path.normpath(os.path.join(os.path.dirname(target), e.target))
                        if os.path.isabs(e.target) or not _inside(root, resolved):
                            skip(it.path, f"symlink to {e.target!r} points outside DEST")
                            continue
                        user_makedirs(os.path.dirname(target))
                        if os.path.lexists(target):
                            os.unlink(target)
                        os.symlink(e.target, target)
                        links += 1
                    else:
                        total += fetch(e, target)
                        files += 1
                except (OSError, LakeMountError) as exc:
                    skip(it.path, str(exc))
        summary = {"files": files, "directories": dirs, "symlinks": links, "bytes": total, "skipped": skipped}
        emit(summary, f"Downloaded {files} files ({total} bytes), {dirs} directories, {links} symlinks to {dest}"
             + (f"; skipped {len(skipped)}" if skipped else ""))
        if skipped:
            sys.exit(1)
        return
    if not u.path:
        raise InvalidArgument("download needs a path (or --recursive)")
    path, e = _follow(c, u.repo, ref, u.path)
    if e.is_dir:
        raise InvalidArgument(f"{u} is a directory: use --recursive")
    name = posixpath.basename(path.rstrip("/"))
    if dest.endswith(("/", os.sep)) or os.path.isdir(dest):
        if name in ("", ".", ".."):
            raise InvalidArgument(f"{u}: the key has no file name to download into {dest}")
        user_makedirs(dest)
        target = os.path.join(dest, name)
    else:
        target = dest
    size = fetch(e, target)
    emit({"path": u.path, "dest": target, "bytes": size}, f"Downloaded {u.path} to {target} ({size} bytes)")


@contextlib.contextmanager
def _interrupted_download(items: list[Any], dest: str, files: Callable[[], int]) -> Iterator[None]:
    """Turn Ctrl-C into a ``KeyboardInterrupt`` that says how far ``download -r`` got (no partial file is left)."""
    try:
        yield
    except KeyboardInterrupt:
        raise KeyboardInterrupt(
            f"interrupted after downloading {files()} files to {dest} (of {len(items)} entries); no partial file is left"
        ) from None


def _inside(root: str, path: str) -> bool:
    """True if ``path`` (symlinks resolved) is ``root`` or lies below it."""
    real = os.path.realpath(path)
    return real == root or real.startswith(root.rstrip(os.sep) + os.sep)


@fs.command("rm")
@click.argument("uri")
@click.option("--recursive", "-r", is_flag=True, help="Delete everything under the prefix.")
@json_option
def rm(uri: str, recursive: bool) -> None:
    """Delete URI (lakefs://REPO/BRANCH/PATH) as an uncommitted change."""
    u = parse_uri(uri, need_ref=True, need_path=True)
    assert u.ref
    ctx_obj().acts_on(u.repo, "rm", u.ref, u.path)
    c = ctx_obj().app.catalog
    if recursive:
        prefix = u.path.rstrip("/") + "/"
        paths = [it.path for it in c.list(u.repo, u.ref, prefix)]
        if not paths:
            raise NotFound(f"nothing under {u}")
        c.apply(u.repo, u.ref, [(p, None) for p in paths])
        ctx_obj().audit(u.repo, "rm", u.ref, prefix, detail=f'{{"files": {len(paths)}}}')
        emit({"deleted": len(paths)}, f"Deleted {len(paths)} objects under {u}")
        return
    c.delete(u.repo, u.ref, u.path)
    ctx_obj().audit(u.repo, "rm", u.ref, u.path)
    emit({"deleted": u.path}, f"Deleted {u.path}")


COMMANDS = [fs]
