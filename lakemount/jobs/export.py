"""Export: a byte-exact copy of a commit's objects under a prefix, to a local directory or an S3 prefix.

The ref is resolved to a commit (a branch exports its head commit, not its
staging).  The driver reads only that commit's metarange and hands the
ranges that overlap the prefix to executors; each executor reads its ranges,
copies every object in parallel threads while computing SHA-256 (and MD5,
checked against the entry's ETag when that is a plain MD5, so corrupt or
changed source bytes are caught), and writes one manifest part.  Local
files are written through a temporary name and renamed, then given the
entry's modification time and permission bits; directory markers become
directories and symlinks symlinks (S3 targets get empty ``key/`` markers and
skip symlinks).

Layout of the result: the objects, at their path below the prefix, and
``_lakemount_export/``: ``manifest/part-NNNNN.jsonl`` (one JSON object per
line: ``path``, ``type``, ``size``, ``sha256``, ``etag``, ``mtime_ns``) and
``manifest.json`` (commit, counts, parts), written last: a target with a
``manifest.json`` holds a complete export.  A non-empty target is refused
unless ``overwrite``; overwriting replaces colliding files and the manifest,
and leaves other files alone.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import re
import tempfile
import time
from collections import Counter
from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
from typing import Any, Final

from lakemount.app import App
from lakemount.audit.record import JOBS
from lakemount.catalog.blocks import ExportBlocks
from lakemount.catalog.confinement import split_location
from lakemount.catalog.model import decode_value, prefix_end
from lakemount.config import Config
from lakemount.errors import (
    CATEGORIES,
    Corrupt,
    InvalidArgument,
    LakeMountError,
    NotFound,
    PreconditionFailed,
    category_of,
)
from lakemount.jobs.inprocess import job_context
from lakemount.jobs.namespaces import check_outside_namespaces, location_of
from lakemount.jobs.runtime import app_for
from lakemount.jobs.s3client import client_from_config, listing_errors
from lakemount.jobs.session import Progress, interruptible, parallelism, timed, translated

MANIFEST_DIR: Final = "_lakemount_export"
COPY_THREADS: Final = 8
IN_MEMORY: Final = 8 * 1024 * 1024
CHUNK: Final = 4 * 1024 * 1024
FAILURE_SAMPLE: Final = 20
# An export of at most this many objects and bytes runs in this process under ``--engine auto`` (as import).
SMALL_OBJECTS: Final = 1000
SMALL_BYTES: Final = 256 << 20
_PLAIN_MD5: Final = re.compile(r"[0-9a-f]{32}")
_PLURAL: Final = {"file": "files", "directory": "directories", "symlink": "symlinks"}


@dataclass(frozen=True, slots=True)
class Destination:
    """Where an export writes: a local directory, or an S3 bucket and key prefix."""

    kind: str  # "local" | "s3"
    root: str  # local: absolute directory; s3: bucket
    prefix: str = ""  # s3: "" or ending in "/"

    def url(self, rel: str) -> str:
        if self.kind == "local":
            return f"{self.root}/{rel}"
        return f"s3://{self.root}/{self.prefix}{rel}"

    def __str__(self) -> str:
        return self.root if self.kind == "local" else f"s3://{self.root}/{self.prefix}"


def _parse_destination(text: str) -> Destination:
    kind, where, prefix = split_location(text, "export to", "target")
    if kind == "s3":
        return Destination("s3", where, prefix)
    path = os.path.abspath(where)
    if os.path.exists(path) and not os.path.isdir(path):
        raise InvalidArgument(f"export target exists and is not a directory: {path}")
    if path == "/":
        raise InvalidArgument("refusing to export into the root directory")
    return Destination("local", path)


def _s3_keys(client: Any, dest: Destination, prefix: str, limit: int | None = None) -> Iterator[str]:
    paginator = client.get_paginator("list_objects_v2")
    config = {"MaxItems": limit} if limit else {}
    with listing_errors("export", dest.root, f"s3://{dest.root}/{prefix}"):
        for page in paginator.paginate(Bucket=dest.root, Prefix=prefix, PaginationConfig=config):
            for obj in page.get("Contents", []):
                yield obj["Key"]


def _is_empty(dest: Destination, client: Any) -> bool:
    if dest.kind == "local":
        if not os.path.exists(dest.root):
            return True
        with os.scandir(dest.root) as it:
            return next(it, None) is None
    return next(_s3_keys(client, dest, dest.prefix, 1), None) is None


def _clear_manifest(dest: Destination, app: App, client: Any) -> None:
    if dest.kind == "local":
        base = os.path.join(dest.root, MANIFEST_DIR)
        for sub in ("manifest.json",):
            try:
                os.unlink(os.path.join(base, sub))
            except FileNotFoundError:
                pass
        parts = os.path.join(base, "manifest")
        if os.path.isdir(parts):
            for name in os.listdir(parts):
                os.unlink(os.path.join(parts, name))
        return
    for key in list(_s3_keys(client, dest, dest.prefix + MANIFEST_DIR + "/")):
        app.catalog.delete_stored(f"s3://{dest.root}/{key}")


def _safe_rel(rel: bytes) -> str | None:
    """The relative path as text if it is safe to create under the target, else None."""
    try:
        text = rel.decode("utf-8")
    except UnicodeDecodeError:
        return None
    body = text[:-1] if text.endswith("/") else text
    if not body or "\0" in body:
        return None
    parts = body.split("/")
    if any(p in ("", ".", "..") for p in parts) or parts[0] == MANIFEST_DIR:
        return None
    return text


def _copy_bytes(blocks: ExportBlocks, src: str, size: int, sink: Any) -> tuple[str, str, int]:
    """Stream ``src`` into ``sink(chunk)``; returns (sha256, md5, bytes)."""
    sha = hashlib.sha256()
    md5 = hashlib.md5(usedforsecurity=False)
    n = 0
    if size <= IN_MEMORY:
        data = blocks.get(src)
        sha.update(data)
        md5.update(data)
        sink(data)
        return sha.hexdigest(), md5.hexdigest(), len(data)
    with blocks.open(src) as f:
        while chunk := f.read(CHUNK):
            sha.update(chunk)
            md5.update(chunk)
            sink(chunk)
            n += len(chunk)
    return sha.hexdigest(), md5.hexdigest(), n


def _verify(key: str, entry: Any, got_size: int, got_md5: str) -> None:
    if got_size != entry.size:
        raise Corrupt(f"{key}: read {got_size} bytes, the entry says {entry.size}")
    if _PLAIN_MD5.fullmatch(entry.etag) and entry.etag != got_md5:
        raise Corrupt(f"{key}: content does not match its ETag (changed or damaged at the source)")


def _copy_local(blocks: ExportBlocks, dest: Destination, src: str, rel: str, entry: Any) -> tuple[str, str, int]:
    path = os.path.join(dest.root, rel)
    if entry.is_dir:
        os.makedirs(path, exist_ok=True)
        return "", "", 0
    directory = os.path.dirname(path)
    os.makedirs(directory, exist_ok=True)
    if entry.is_symlink:
        if os.path.lexists(path):
            os.unlink(path)
        os.symlink(entry.target, path)
        return "", "", 0
    fd, tmp = tempfile.mkstemp(prefix=".lakemount-export-", dir=directory)
    try:
        with os.fdopen(fd, "wb") as out:
            sha, md5, n = _copy_bytes(blocks, src, entry.size, out.write)
        _verify(rel, entry, n, md5)
        os.chmod(tmp, entry.mode & 0o7777 or 0o644)
        if entry.mtime_ns:
            os.utime(tmp, ns=(entry.mtime_ns, entry.mtime_ns))
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    return sha, md5, n


def _copy_s3(blocks: ExportBlocks, dest: Destination, src: str, rel: str, entry: Any, tmpdir: str | None) -> tuple[str, str, int]:
    url = dest.url(rel)
    if entry.is_dir:
        blocks.put(url if url.endswith("/") else url + "/", b"")
        return "", "", 0
    if entry.size <= IN_MEMORY:
        buf: list[bytes] = []
        sha, md5, n = _copy_bytes(blocks, src, entry.size, buf.append)
        _verify(rel, entry, n, md5)
        blocks.put(url, b"".join(buf))
        return sha, md5, n
    fd, tmp = tempfile.mkstemp(prefix="lakemount-export-", dir=tmpdir)
    try:
        with os.fdopen(fd, "wb") as out:
            sha, md5, n = _copy_bytes(blocks, src, entry.size, out.write)
        _verify(rel, entry, n, md5)
        blocks.put_file(url, tmp)
    finally:
        os.unlink(tmp)
    return sha, md5, n


def _export_task(
    config: Config, namespace: str, prefix: bytes, stop: bytes | None, dest: Destination, counter: Any,
    index: int, ranges: Iterable[tuple[str, str]],
) -> Iterator[dict[str, Any]]:
    app = app_for(config)
    blocks = app.catalog.export_blocks()
    tmpdir = os.path.join(config.home, "tmp")
    os.makedirs(tmpdir, exist_ok=True)
    work: list[tuple[bytes, Any]] = []
    for range_id, checksum in ranges:
        reader = app.catalog.read_range(namespace, range_id, checksum)
        for key, value in reader.scan(prefix):
            if stop is not None and key >= stop:
                break
            work.append((key, decode_value(value)))
    stats: Counter[str] = Counter()
    failures: list[tuple[str, str, str]] = []
    lines: list[str] = []

    def copy_one(item: tuple[bytes, Any]) -> tuple[str, Any, tuple[str, str, int] | None, LakeMountError | OSError | None]:
        key, entry = item
        rel = _safe_rel(key[len(prefix) :])
        shown = key.decode("utf-8", "replace")
        if rel is None:
            return shown, entry, None, InvalidArgument(f"{shown}: not a safe relative path under the target")
        if dest.kind == "s3" and entry.is_symlink:
            return rel, entry, None, None
        src = entry.address if "://" in entry.address else f"{namespace.rstrip('/')}/{entry.address}"
        try:
            if dest.kind == "local":
                return rel, entry, _copy_local(blocks, dest, src, rel, entry), None
            return rel, entry, _copy_s3(blocks, dest, src, rel, entry, tmpdir), None
        except (LakeMountError, OSError) as exc:
            return rel, entry, None, exc

    with ThreadPoolExecutor(COPY_THREADS) as pool:
        for rel, entry, result, exc in pool.map(copy_one, work):
            counter.add(1)
            if exc is not None:
                stats["failed"] += 1
                kind = category_of(exc).__name__ if isinstance(exc, LakeMountError) else "Unavailable"
                if len(failures) < FAILURE_SAMPLE:
                    failures.append((rel, kind, str(exc)))
                continue
            if result is None:
                stats["skipped_symlinks"] += 1
                continue
            sha, _md5, n = result
            kind = "directory" if entry.is_dir else "symlink" if entry.is_symlink else "file"
            stats[_PLURAL[kind]] += 1
            stats["bytes"] += n
            rec = {"path": rel, "type": kind, "size": n, "sha256": sha, "etag": entry.etag, "mtime_ns": entry.mtime_ns}
            if entry.is_symlink:
                rec["target"] = entry.target
            lines.append(json.dumps(rec, sort_keys=True) + "\n")
    part = f"{MANIFEST_DIR}/manifest/part-{index:05d}.jsonl"
    data = "".join(lines).encode()
    if dest.kind == "local":
        path = os.path.join(dest.root, part)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(data)
    else:
        blocks.put(dest.url(part), data)
    yield {"stats": dict(stats), "failures": failures, "part": part if lines else None}


def is_small(app: App, repo: str, commit_id: str, start: bytes, stop: bytes | None) -> bool:
    """Whether the commit holds at most ``SMALL_OBJECTS`` objects and ``SMALL_BYTES`` under the prefix
    (reads at most that many records)."""
    records = itertools.islice(app.catalog.scan_records(repo, commit_id, start, stop), SMALL_OBJECTS + 1)
    count = size = 0
    for _key, value in records:
        count += 1
        size += decode_value(value).size
    return count <= SMALL_OBJECTS and size <= SMALL_BYTES


def export_objects(
    app: App,
    repo: str,
    ref: str,
    prefix: str,
    dest_text: str,
    *,
    overwrite: bool = False,
    master: str | None = None,
    show_progress: bool | None = None,
    engine: str = "auto",
) -> dict[str, Any]:
    """Copy the objects under ``prefix`` at ``ref`` to ``dest_text``; returns a report.

    ``engine`` is ``auto``, ``spark`` or ``in-process`` (``inprocess.job_context``: ``auto`` runs an
    export of at most ``SMALL_OBJECTS`` objects and ``SMALL_BYTES`` here); the report's ``engine`` says
    which ran.

    Raises ``NotFound`` (repository, ref, nothing under the prefix, missing
    bucket or object data), ``PreconditionFailed`` (target not empty without
    ``overwrite``), ``InvalidArgument`` (bad target), ``Corrupt`` (bytes that do
    not match their entry).  Objects that failed are listed in the error; the
    rest are copied and the manifest is not marked complete.
    """
    timings: dict[str, float] = {}
    started = time.monotonic()
    cat = app.catalog
    r = cat.repository(repo)
    commit = cat.commit_of(repo, ref)
    pkey = prefix.encode("utf-8")
    if pkey and not pkey.endswith(b"/"):
        pkey += b"/"
    stop = prefix_end(pkey) if pkey else None
    if next(cat.scan_records(repo, commit.id, pkey, stop), None) is None:
        raise NotFound(f"no objects under {prefix or '/'} at {repo}/{ref} (commit {commit.id[:12]})")
    ranges = [(info.id, info.checksum) for info in cat.ranges(repo, commit.id, start=pkey, stop=stop)]
    dest = _parse_destination(dest_text)
    check_outside_namespaces(app, location_of(dest.kind, dest.root, dest.prefix), "export target")
    client = client_from_config(app.config) if dest.kind == "s3" else None
    if not _is_empty(dest, client):
        if not overwrite:
            raise PreconditionFailed(f"export target {dest} is not empty (use --overwrite to write into it)")
        _clear_manifest(dest, app, client)
    if dest.kind == "local":
        os.makedirs(dest.root, exist_ok=True)
    start = time.monotonic()
    sc, ran_on = job_context(engine, master, lambda: is_small(app, repo, commit.id, pkey, stop))
    timings["spark_start" if ran_on == "spark" else "size_check"] = round(time.monotonic() - start, 3)
    counter = sc.accumulator(0)
    n = max(1, min(len(ranges), parallelism(sc) * 4))
    fn = partial(_export_task, app.config, r.storage_namespace, pkey, stop, dest, counter)
    with timed(timings, "export"):
        left = (
            f"export interrupted: {dest} holds part of it and no {MANIFEST_DIR}/manifest.json; "
            f"run the same export again with --overwrite to finish it"
        )
        with interruptible(sc, left), translated(), Progress(
            sc, "export", unit="obj", counter=lambda: counter.value, enabled=show_progress
        ):
            results = sc.parallelize(ranges, n).mapPartitionsWithIndex(fn).collect()
    stats: Counter[str] = Counter()
    failures: list[tuple[str, str, str]] = []
    parts: list[str] = []
    for res in results:
        stats.update(res["stats"])
        failures.extend(res["failures"])
        if res["part"]:
            parts.append(res["part"])
    summary = {
        "repository": repo,
        "ref": ref,
        "commit": commit.id,
        "prefix": pkey.decode(),
        "target": str(dest),
        "engine": ran_on,
        "files": stats["files"],
        "directories": stats["directories"],
        "symlinks": stats["symlinks"],
        "skipped_symlinks": stats["skipped_symlinks"],
        "bytes": stats["bytes"],
        "failed": stats["failed"],
        "parts": sorted(parts),
        "manifest": f"{MANIFEST_DIR}/manifest.json",
    }
    if failures:
        kinds = {k for _p, k, _m in failures}
        by_name = {c.__name__: c for c in CATEGORIES}
        cls = by_name.get(kinds.pop(), LakeMountError) if len(kinds) == 1 else LakeMountError
        shown = "; ".join(f"{m}" for _p, _k, m in failures[:5])
        raise cls(f"export incomplete: {stats['failed']} object(s) failed ({shown}); the manifest is not marked complete")
    body = json.dumps({**summary, "created": time.time()}, indent=1, sort_keys=True).encode()
    if dest.kind == "local":
        path = os.path.join(dest.root, MANIFEST_DIR, "manifest.json")
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(body)
    else:
        app.catalog.export_blocks().put(dest.url(f"{MANIFEST_DIR}/manifest.json"), body)
    elapsed = time.monotonic() - started
    summary["timings"] = {**timings, "total": round(elapsed, 3)}
    if app.audit is not None:  # one record per job, with its counts
        app.audit.record(repo=repo, op="export", ref=ref, commit=commit.id, path=pkey.decode(), nbytes=stats["bytes"],
                         frontend=JOBS, detail=json.dumps({"target": str(dest), "files": stats["files"], "failed": stats["failed"]}))
    return summary
