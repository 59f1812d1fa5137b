"""Zero-copy import: stage entries that point at objects where they already are.

``import_objects`` lists a local directory or an S3 prefix and stages, under a
destination prefix of a branch, one entry per object whose address is the
object's absolute URL (``local:///abs/path``, ``s3://bucket/key``), with size,
ETag and modification time from the listing (MD5 of the content for local
files, which have no ETag).  No byte is copied, and GC never deletes such
objects: they are outside every storage namespace.  What may be imported is
the catalog's rule (``Catalog.import_source``, ``catalog/confinement.py``): a
local source lies under ``blockstore.local.import_roots`` after symlinks and
``..`` are resolved, and no source overlaps a storage namespace; the driver
asks it before Spark starts, and walks the resolved directory.

Like lakeFS's import, the result *replaces* the destination prefix: keys
under it that the source does not have are staged as deletions.  Re-importing
an unchanged source stages nothing.

Work split: the driver lists the source one "directory" level at a time
(descending until there is enough parallelism) and cuts the sorted level
into tasks, each owning a contiguous key interval ``[lo, hi)``: one
subdirectory, or a run of at most ``FILES_PER_TASK`` files.  Executors list
their subtree themselves, hash local files, read the branch's current entries
in their interval (``Catalog.scan_records``) and stage the difference in batches
through the catalog, so the driver never holds the listing's entries.
With ``commit``, the branch is committed afterwards; that is refused up front
when the branch has uncommitted changes outside the destination prefix.

A source of at most ``SMALL_OBJECTS`` objects (and, local, ``SMALL_BYTES`` to
hash) is imported in this process (``inprocess.py``): the same plan and the same
tasks, without the seconds a Spark context takes to start.
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import json
import os
import stat
import time
from collections.abc import Iterable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass
from functools import partial
from typing import Any, Final

from lakemount.app import App
from lakemount.audit.record import JOBS
from lakemount.catalog.catalog import MAX_KEY_BYTES, SOURCE_MTIME_KEY, Catalog
from lakemount.catalog.confinement import ImportSource
from lakemount.catalog.model import DIR_MODE, FILE_MODE, Entry, prefix_end
from lakemount.config import Config
from lakemount.errors import (
    InvalidArgument,
    NotFound,
    NothingToCommit,
    PreconditionFailed,
)
from lakemount.jobs.inprocess import job_context
from lakemount.jobs.runtime import app_for
from lakemount.jobs.s3client import client_from_config, listing_errors
from lakemount.jobs.session import Progress, interruptible, parallelism, timed, translated

FILES_PER_TASK: Final = 5000
STAGE_BATCH: Final = 5000
MAX_PLAN_DEPTH: Final = 4
HASH_CHUNK: Final = 1 << 20
# Up to here an import runs in-process: listing and hashing this much takes well under the seconds Spark takes to start.
SMALL_OBJECTS: Final = 1000
SMALL_BYTES: Final = 256 << 20

# A planned unit: ("dir", rel) | ("lfile", rel) | ("lother", rel) (a local symlink, socket...: skipped)
# | ("sfile", rel, size, mtime, etag)
Unit = tuple[Any, ...]


@dataclass(frozen=True, slots=True)
class Target:
    """Where imported objects land: a branch of a repository, under a key prefix."""

    repo: str
    branch: str
    prefix: bytes  # empty, or ends with b"/"


@dataclass(frozen=True, slots=True)
class Task:
    """One unit of import work for an executor: the source keys in ``[lo, hi)`` and the listing units covering them."""

    lo: bytes  # relative to the source root
    hi: bytes | None
    units: tuple[Unit, ...]


# ---------------------------------------------------------------------------- planning (driver)
def _level_local(source: ImportSource, rel: bytes) -> list[tuple[bytes, Unit]]:
    base = os.fsencode(source.root) + b"/" + rel
    out: list[tuple[bytes, Unit]] = []
    try:
        with os.scandir(base) as it:
            for e in it:
                try:
                    if e.is_dir(follow_symlinks=False):
                        key = rel + e.name + b"/"
                        out.append((key, ("dir", key)))
                    elif e.is_file(follow_symlinks=False):
                        key = rel + e.name
                        out.append((key, ("lfile", key)))
                    else:  # symlinks, sockets, devices: the executor counts them as skipped
                        key = rel + e.name
                        out.append((key, ("lother", key)))
                except OSError:
                    continue
    except FileNotFoundError:
        return []
    out.sort(key=lambda t: t[0])
    return out


def _s3_listing(source: ImportSource) -> AbstractContextManager[None]:
    return listing_errors("source", source.root, source.url)


def is_small(source: ImportSource, client: Any = None) -> bool:
    """Whether ``source`` holds at most ``SMALL_OBJECTS`` objects (and, local, ``SMALL_BYTES``).

    Lists at most that many objects to find out (one request on S3); locally,
    directories count as objects, so that a tree of empty ones is not walked whole.
    """
    if source.kind == "s3":
        with _s3_listing(source):
            page = client.list_objects_v2(Bucket=source.root, Prefix=source.prefix, MaxKeys=SMALL_OBJECTS)
        return not page.get("IsTruncated")
    total = [0]

    def walk(path: bytes) -> Iterator[None]:
        try:
            with os.scandir(path) as it:
                entries = list(it)
        except (FileNotFoundError, NotADirectoryError):
            return
        for e in entries:  # every entry counts, directories too: the walk stops after SMALL_OBJECTS of any kind
            yield None
            with contextlib.suppress(FileNotFoundError):
                if e.is_dir(follow_symlinks=False):
                    yield from walk(e.path)
                elif e.is_file(follow_symlinks=False):
                    total[0] += e.stat(follow_symlinks=False).st_size

    seen = sum(1 for _ in itertools.islice(walk(os.fsencode(source.root)), SMALL_OBJECTS + 1))
    return seen <= SMALL_OBJECTS and total[0] <= SMALL_BYTES


def _level_s3(client: Any, source: ImportSource, rel: bytes) -> list[tuple[bytes, Unit]]:
    out: list[tuple[bytes, Unit]] = []
    prefix = source.prefix + rel.decode()
    paginator = client.get_paginator("list_objects_v2")
    with _s3_listing(source):
        for page in paginator.paginate(Bucket=source.root, Prefix=prefix, Delimiter="/"):
            for cp in page.get("CommonPrefixes", []):
                key = cp["Prefix"][len(source.prefix) :].encode()
                out.append((key, ("dir", key)))
            for obj in page.get("Contents", []):
                key = obj["Key"][len(source.prefix) :].encode()
                out.append(
                    (key, ("sfile", key, int(obj["Size"]), obj["LastModified"].timestamp(), obj["ETag"].strip('"')))
                )
    out.sort(key=lambda t: t[0])
    return out


def plan(source: ImportSource, want_tasks: int, client: Any = None) -> list[Task]:
    """Cut the source into tasks covering disjoint, contiguous key intervals."""
    level = (lambda rel: _level_local(source, rel)) if source.kind == "local" else (lambda rel: _level_s3(client, source, rel))
    items = level(b"")
    for _depth in range(MAX_PLAN_DEPTH):
        dirs = sum(1 for _k, u in items if u[0] == "dir")
        files = len(items) - dirs
        if not dirs or dirs + files // FILES_PER_TASK >= want_tasks:
            break
        expanded: list[tuple[bytes, Unit]] = []
        for key, unit in items:
            if unit[0] == "dir":
                expanded.extend(level(key))
            else:
                expanded.append((key, unit))
        items = expanded
    groups: list[list[tuple[bytes, Unit]]] = []
    run: list[tuple[bytes, Unit]] = []
    for key, unit in items:
        if unit[0] == "dir":
            if run:
                groups.append(run)
                run = []
            groups.append([(key, unit)])
        else:
            run.append((key, unit))
            if len(run) >= FILES_PER_TASK:
                groups.append(run)
                run = []
    if run:
        groups.append(run)
    tasks = []
    for i, g in enumerate(groups):
        lo = b"" if i == 0 else g[0][0]
        hi = groups[i + 1][0][0] if i + 1 < len(groups) else None
        tasks.append(Task(lo, hi, tuple(u for _k, u in g)))
    return tasks


# ---------------------------------------------------------------------------- executors
def _hash_file(path: bytes) -> tuple[int, int, str] | None:
    """(size, mtime_ns, MD5 hex) of a regular file, from one open descriptor; None if it vanished.

    Size is what was read (a file growing meanwhile is imported as read).
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
    except FileNotFoundError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return None
        h = hashlib.md5(usedforsecurity=False)
        size = 0
        while chunk := os.read(fd, HASH_CHUNK):
            h.update(chunk)
            size += len(chunk)
        return size, st.st_mtime_ns, h.hexdigest()
    finally:
        os.close(fd)


def _local_records(source: ImportSource, prefix: bytes, units: Iterable[Unit], skipped: list[int]) -> Iterator[tuple[bytes, Entry]]:
    root = os.fsencode(source.root) + b"/"

    def one(rel: bytes) -> Iterator[tuple[bytes, Entry]]:
        path = root + rel
        key = prefix + rel
        try:
            url = "local://" + path.decode("utf-8")
        except UnicodeDecodeError:
            skipped[0] += 1
            return
        if len(key) > MAX_KEY_BYTES:
            skipped[0] += 1
            return
        found = _hash_file(path)
        if found is not None:  # None: removed while we listed
            size, mtime_ns, etag = found
            yield key, Entry(url, size, etag, mtime_ns, "", ((SOURCE_MTIME_KEY, str(mtime_ns)),), FILE_MODE)

    def walk(rel: bytes) -> Iterator[tuple[bytes, Entry]]:
        try:
            with os.scandir(root + rel) as it:
                entries = list(it)
        except (FileNotFoundError, NotADirectoryError):
            return
        for e in entries:
            try:
                if e.is_dir(follow_symlinks=False):
                    yield from walk(rel + e.name + b"/")
                elif e.is_file(follow_symlinks=False):
                    yield from one(rel + e.name)
                else:
                    skipped[0] += 1  # symlinks, sockets, devices
            except FileNotFoundError:
                continue

    for unit in units:
        if unit[0] == "dir":
            yield from walk(unit[1])
        elif unit[0] == "lother":
            skipped[0] += 1
        else:
            yield from one(unit[1])


def _s3_records(
    catalog: Catalog, source: ImportSource, prefix: bytes, units: Iterable[Unit], skipped: list[int]
) -> Iterator[tuple[bytes, Entry]]:
    base = source.url

    def entry(rel: bytes, url: str, size: int, mtime: float, etag: str) -> Iterator[tuple[bytes, Entry]]:
        key = prefix + rel
        if len(key) > MAX_KEY_BYTES:
            skipped[0] += 1
            return
        mtime_ns = int(round(mtime * 1e9))
        if rel.endswith(b"/") and size == 0:
            yield key, Entry("", 0, "", mtime_ns, "", (), DIR_MODE)
        else:
            yield key, Entry(url, size, etag, mtime_ns, "", (), FILE_MODE)

    for unit in units:
        if unit[0] == "dir":
            for info in catalog.list_stored(base + unit[1].decode()):
                yield from entry(info.url[len(base) :].encode(), info.url, info.size, info.mtime, info.etag)
        else:
            _kind, rel, size, mtime, etag = unit
            yield from entry(rel, base + rel.decode(), size, mtime, etag)


def _import_task(
    config: Config, source: ImportSource, target: Target, counters: dict[str, Any], tasks: Iterable[Task]
) -> Iterator[int]:
    app = app_for(config)
    cat = app.catalog
    ref = cat.resolve(target.repo, target.branch)
    end = prefix_end(target.prefix) if target.prefix else None
    for task in tasks:
        skipped = [0]
        if source.kind == "local":
            records = list(_local_records(source, target.prefix, task.units, skipped))
        else:
            records = list(_s3_records(cat, source, target.prefix, task.units, skipped))
        records.sort(key=lambda r: r[0])
        start = target.prefix + task.lo
        stop = target.prefix + task.hi if task.hi is not None else end
        existing = cat.scan_records(target.repo, ref, start, stop)
        changes: list[tuple[bytes, bytes | None]] = []
        staged = unchanged = removed = size = 0
        cur = next(existing, None)
        for key, e in records:
            size += e.size
            while cur is not None and cur[0] < key:
                changes.append((cur[0], None))
                removed += 1
                cur = next(existing, None)
            value = e.value()
            if cur is not None and cur[0] == key:
                same = cur[1][:16] == value[:16]
                cur = next(existing, None)
                if same:
                    unchanged += 1
                    continue
            changes.append((key, value))
            staged += 1
        while cur is not None:
            changes.append((cur[0], None))
            removed += 1
            cur = next(existing, None)
        for i in range(0, len(changes), STAGE_BATCH):
            cat.stage_records(target.repo, target.branch, changes[i : i + STAGE_BATCH])
        counters["objects"].add(len(records))
        counters["staged"].add(staged)
        counters["unchanged"].add(unchanged)
        counters["removed"].add(removed)
        counters["skipped"].add(skipped[0])
        counters["bytes"].add(size)
        yield len(records)


# ---------------------------------------------------------------------------- driver
def _check_target(app: App, target: Target, commit: bool, also: tuple[bytes, ...] = ()) -> None:
    """The branch takes the import (``commit``: has no uncommitted changes outside its destination
    prefix, nor outside ``also``, the other destinations of an import of several sources)."""
    cat = app.catalog
    cat.repository(target.repo)
    cat.writable_branch(target.repo, target.branch)  # a tag, a protected branch: refused before the source is listed
    if commit:
        places = (target.prefix, *also)
        for rec in cat.diff_uncommitted(target.repo, target.branch):
            if not rec.key.startswith(places):
                shown = ", ".join(p.decode(errors="replace") or "/" for p in places)
                raise PreconditionFailed(
                    f"branch {target.repo}/{target.branch} has uncommitted changes outside {shown} "
                    f"(e.g. {rec.key.decode(errors='replace')}): commit or reset them, or import without --commit"
                )


@dataclass(frozen=True, slots=True)
class Location:
    """One source of an import (lakeFS's ``ImportLocation``): a ``common_prefix`` whose objects replace the
    destination prefix, or one ``object`` staged at the destination key."""

    type: str  # "common_prefix" | "object"
    path: str
    destination: str


def import_object(app: App, source: ImportSource, repo: str, branch: str, key: str) -> Entry:
    """Stage the one object ``source`` names (``Catalog.import_source(..., single=True)``) at ``key``; returns its entry.

    Raises ``NotFound`` if it is gone, and what staging raises.
    """
    skipped = [0]
    if source.kind == "local":
        records = list(_local_records(source, b"", [("lfile", os.fsencode(source.name))], skipped))
    else:
        url = source.url
        with _s3_listing(source):
            found = [i for i in app.catalog.list_stored(url) if i.url == url]
        units = [("sfile", source.name.encode(), f.size, f.mtime, f.etag) for f in found]
        records = list(_s3_records(app.catalog, ImportSource("s3", source.root, source.prefix), b"", units, skipped))
    if not records:
        raise NotFound(f"nothing to import: {source.url} does not exist")
    entry = records[0][1]
    app.catalog.apply(repo, branch, [(key, entry)])
    return entry


def import_locations(
    app: App,
    locations: Iterable[Location],
    repo: str,
    branch: str,
    *,
    commit: bool = False,
    message: str | None = None,
    committer: str = "lakemount",
    metadata: Iterable[tuple[str, str]] = (),
    engine: str = "auto",
    show_progress: bool | None = None,
) -> dict[str, Any]:
    """Import several sources together, prefixes and single objects, committed once (lakeFS's ``importStart``
    with several ``paths``); returns a report whose ``objects`` counts them all.

    Every source is asked of the catalog's rule (``import_source``) before anything is staged, so one
    refused source refuses the import.  Destinations may not overlap (``InvalidArgument``: a prefix's import
    would remove what another source put under it).  No source at all is, as in lakeFS, one empty commit
    carrying ``message`` and ``metadata`` (with ``commit``; ``InvalidArgument`` without: nothing to do), on
    a branch with no uncommitted changes.  Raises what :func:`import_objects` raises.
    """
    locs = list(locations)
    if not locs:
        return _empty_import(app, repo, branch, commit, message, committer, metadata)
    sources = [app.catalog.import_source(loc.path, single=loc.type == "object") for loc in locs]
    places: list[bytes] = []
    for loc in locs:
        if loc.type == "object":
            if not loc.destination or loc.destination.endswith("/"):
                raise InvalidArgument(f"an object import needs a destination object path: {loc.path}")
            places.append(loc.destination.encode())
        else:
            places.append((loc.destination if not loc.destination or loc.destination.endswith("/") else loc.destination + "/").encode())
    for (i, a), (j, b) in itertools.permutations(enumerate(places), 2):
        if a.startswith(b) and (locs[j].type != "object" or a == b) and i != j:
            raise InvalidArgument(
                f"import destinations overlap: {a.decode(errors='replace') or '/'} and {b.decode(errors='replace') or '/'}"
            )
    _check_target(app, Target(repo, branch, places[0]), commit, tuple(places[1:]))
    objects = 0
    for loc, source, place in zip(locs, sources, places, strict=True):
        if loc.type == "object":
            import_object(app, source, repo, branch, loc.destination)
            objects += 1
        else:
            report = import_objects(app, loc.path, repo, branch, place.decode(), engine=engine, show_progress=show_progress)
            objects += report["objects"]
    out: dict[str, Any] = {"sources": [s.url for s in sources], "objects": objects, "commit": None}
    if commit:
        urls = ", ".join(s.url for s in sources)
        meta = [("lakemount.import.from", urls), ("lakemount.import.objects", str(objects)), *metadata]
        try:
            res = app.catalog.commit(repo, branch, message or f"Import {urls}", committer=committer, metadata=meta)
            out["commit"] = {"id": res.commit.id, "message": res.commit.message}
        except NothingToCommit:
            pass
    return out


def _empty_import(
    app: App, repo: str, branch: str, commit: bool, message: str | None, committer: str, metadata: Iterable[tuple[str, str]],
) -> dict[str, Any]:
    """An import of no sources: lakeFS's empty import commit (its ``importStart`` with no ``paths``)."""
    if not commit:
        raise InvalidArgument("an import with no source only makes a commit: add --commit")
    cat = app.catalog
    cat.repository(repo)
    cat.writable_branch(repo, branch)
    for rec in cat.diff_uncommitted(repo, branch):  # the commit would take them: an import commits only what it brings
        raise PreconditionFailed(
            f"branch {repo}/{branch} has uncommitted changes (e.g. {rec.key.decode(errors='replace')}): commit or reset them"
        )
    res = cat.commit(repo, branch, message or "Import", committer=committer, metadata=list(metadata), allow_empty=True)
    return {"sources": [], "objects": 0, "commit": {"id": res.commit.id, "message": res.commit.message}}


def import_objects(
    app: App,
    source_text: str,
    repo: str,
    branch: str,
    prefix: str = "",
    *,
    commit: bool = False,
    message: str | None = None,
    committer: str = "lakemount",
    metadata: Iterable[tuple[str, str]] = (),
    master: str | None = None,
    engine: str = "auto",
    show_progress: bool | None = None,
) -> dict[str, Any]:
    """Import ``source_text`` under ``prefix`` of ``repo``/``branch``; returns a report.

    ``engine`` is ``auto``, ``spark`` or ``in-process`` (``inprocess.job_context``);
    the report's ``engine`` says which ran.

    Raises ``OutsideRoots`` (a local source outside ``blockstore.local.import_roots``),
    ``NotFound`` (repository, branch, source directory or bucket, empty
    source), ``ReadOnly`` (not a branch, protected branch), ``PreconditionFailed``
    (``commit`` with unrelated uncommitted changes), ``InvalidArgument``.
    """
    timings: dict[str, float] = {}
    started = time.monotonic()
    # The one rule of what may be imported (roots, namespaces), asked before Spark starts.
    source = app.catalog.import_source(source_text)
    if prefix and not prefix.endswith("/"):
        prefix += "/"
    target = Target(repo, branch, prefix.encode())
    _check_target(app, target, commit)
    client = client_from_config(app.config) if source.kind == "s3" else None
    start = time.monotonic()
    sc, ran_on = job_context(engine, master, lambda: is_small(source, client))
    timings["spark_start" if ran_on == "spark" else "size_check"] = round(time.monotonic() - start, 3)
    with timed(timings, "plan"):
        tasks = plan(source, parallelism(sc) * 4, client)
    if not tasks:
        raise NotFound(f"nothing to import: {source.url} is empty or does not exist")
    counters = {k: sc.accumulator(0) for k in ("objects", "staged", "unchanged", "removed", "skipped", "bytes")}
    n = max(1, min(len(tasks), parallelism(sc) * 4))
    fn = partial(_import_task, app.config, source, target, counters)
    with timed(timings, "import"):
        left = (
            f"import interrupted, nothing committed; part of it may be staged on lakefs://{repo}/{branch}/{prefix}: "
            f"run the same import again to finish it (unchanged objects are skipped), or drop it with "
            f"lakemount reset lakefs://{repo}/{branch} --prefix '{prefix}'"
        )
        with interruptible(sc, left), translated(), Progress(
            sc, "import", unit="obj", counter=lambda: counters["objects"].value, enabled=show_progress
        ):
            sc.parallelize(tasks, n).mapPartitions(fn).count()
    stats = {k: v.value for k, v in counters.items()}
    if stats["objects"] == 0 and stats["removed"] == 0:
        raise NotFound(f"nothing to import: {source.url} holds no objects")
    report: dict[str, Any] = {
        "source": source.url,
        "destination": f"lakefs://{repo}/{branch}/{prefix}",
        "tasks": len(tasks),
        "engine": ran_on,
        **stats,
        "commit": None,
    }
    if commit:
        meta = [("lakemount.import.from", source.url), ("lakemount.import.objects", str(stats["objects"])), *metadata]
        with timed(timings, "commit"):
            try:
                res = app.catalog.commit(
                    repo, branch, message or f"Import {source.url} into {prefix or '/'}", committer=committer, metadata=meta
                )
                report["commit"] = {"id": res.commit.id, "message": res.commit.message}
            except NothingToCommit:
                report["commit"] = None
    elapsed = time.monotonic() - started
    report["timings"] = {**timings, "total": round(elapsed, 3)}
    work = timings.get("plan", 0.0) + timings.get("import", 0.0)
    report["objects_per_second"] = round(stats["objects"] / work) if work > 0 else None
    if app.audit is not None:  # one record per job, with its counts (the records of its tasks would be millions)
        app.audit.record(repo=repo, op="import", ref=branch, commit=(report["commit"] or {}).get("id", ""), path=prefix,
                         nbytes=stats["bytes"], frontend=JOBS, detail=json.dumps({"source": source.url, "engine": ran_on, **stats}))
    return report
