"""``lakemount fs``: list, read, write and delete objects by path."""

from __future__ import annotations

import mimetypes
import os
import sys

import click

from lakemount.cli.common import ctx_obj, emit, entry_json, iso, json_option, parse_uri, progress
from lakemount.errors import InvalidArgument, NotFound


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
    cat = ctx_obj().app.catalog
    items = list(cat.list(u.repo, u.ref, prefix, delimiter="" if recursive else "/"))
    rows = []
    lines = []
    for it in items:
        if it.entry is None:
            rows.append({"path": it.path, "path_type": "common_prefix"})
            lines.append(f"{'DIR':<8} {'':>12} {'':<25} {it.path}")
        else:
            rows.append(entry_json(it.path, it.entry))
            lines.append(f"{'object':<8} {it.entry.size:>12} {iso(it.entry.mtime_ns / 1e9):<25} {it.path}")
    emit(rows, lines)


@fs.command("cat")
@click.argument("uri")
def cat_(uri: str) -> None:
    """Write an object's content to stdout."""
    u = parse_uri(uri, need_ref=True, need_path=True)
    assert u.ref
    c = ctx_obj().app.catalog
    e = c.stat(u.repo, u.ref, u.path)
    repo = c.repository(u.repo)
    out = sys.stdout.buffer
    with c.open(repo, e) as f:
        while chunk := f.read(4 * 1024 * 1024):
            out.write(chunk)
    out.flush()


@fs.command("stat")
@click.argument("uri")
@json_option
def stat_(uri: str) -> None:
    """Show an object's metadata."""
    u = parse_uri(uri, need_ref=True, need_path=True)
    assert u.ref
    e = ctx_obj().app.catalog.stat(u.repo, u.ref, u.path)
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
        ref = c.resolve(u.repo, u.ref)
        done = []
        with progress(len(files), "upload", "file") as bar:
            for full, rel in files:
                e = c.put(u.repo, ref, base + rel, full, content_type=content_type or mimetypes.guess_type(rel)[0] or "")
                done.append(entry_json(base + rel, e))
                bar.update(1)
        emit(done, f"Uploaded {len(done)} files to {u}")
        return
    if not u.path:
        raise InvalidArgument("upload needs a destination path: lakefs://REPO/BRANCH/PATH")
    e = c.put(u.repo, u.ref, u.path, source, content_type=content_type or mimetypes.guess_type(u.path)[0] or "")
    emit(entry_json(u.path, e), f"Path: {u.path}\nSize: {e.size} bytes\nChecksum: {e.etag}")


@fs.command("download")
@click.argument("uri")
@click.argument("dest", type=click.Path())
@click.option("--recursive", "-r", is_flag=True, help="Download everything under the URI's prefix.")
@json_option
def download(uri: str, dest: str, recursive: bool) -> None:
    """Download URI (lakefs://REPO/REF/PATH) to local DEST."""
    u = parse_uri(uri, need_ref=True)
    assert u.ref
    c = ctx_obj().app.catalog
    repo = c.repository(u.repo)
    ref = c.resolve(u.repo, u.ref)

    def fetch(path: str, target: str) -> int:
        e = c.stat(u.repo, ref, path)
        os.makedirs(os.path.dirname(os.path.abspath(target)), exist_ok=True)
        tmp = target + ".lm-part"
        with c.open(repo, e) as src, open(tmp, "wb") as out:
            while chunk := src.read(4 * 1024 * 1024):
                out.write(chunk)
        os.replace(tmp, target)
        return e.size

    if recursive:
        prefix = u.path.rstrip("/") + "/" if u.path else ""
        items = [it for it in c.list(u.repo, ref, prefix) if it.entry is not None and not it.entry.is_dir]
        total = 0
        with progress(len(items), "download", "file") as bar:
            for it in items:
                total += fetch(it.path, os.path.join(dest, it.path[len(prefix) :]))
                bar.update(1)
        emit({"files": len(items), "bytes": total}, f"Downloaded {len(items)} files ({total} bytes) to {dest}")
        return
    if not u.path:
        raise InvalidArgument("download needs a path (or --recursive)")
    target = os.path.join(dest, os.path.basename(u.path)) if os.path.isdir(dest) else dest
    size = fetch(u.path, target)
    emit({"path": u.path, "dest": target, "bytes": size}, f"Downloaded {u.path} to {target} ({size} bytes)")


@fs.command("rm")
@click.argument("uri")
@click.option("--recursive", "-r", is_flag=True, help="Delete everything under the prefix.")
@json_option
def rm(uri: str, recursive: bool) -> None:
    """Delete URI (lakefs://REPO/BRANCH/PATH) as an uncommitted change."""
    u = parse_uri(uri, need_ref=True, need_path=True)
    assert u.ref
    c = ctx_obj().app.catalog
    if recursive:
        prefix = u.path.rstrip("/") + "/"
        paths = [it.path for it in c.list(u.repo, u.ref, prefix)]
        if not paths:
            raise NotFound(f"nothing under {u}")
        c.apply(u.repo, u.ref, [(p, None) for p in paths])
        emit({"deleted": len(paths)}, f"Deleted {len(paths)} objects under {u}")
        return
    c.delete(u.repo, u.ref, u.path)
    emit({"deleted": u.path}, f"Deleted {u.path}")


COMMANDS = [fs]
