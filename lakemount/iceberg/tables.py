"""Namespaces and tables stored in a branch, read and changed through the catalog.

:class:`Tables` is the only code that knows the objects behind a namespace or
a table (their places are ``names.py``'s).  Reads resolve the ref once and read
at that resolution; writes go to branches only (a tag or commit id is
read-only: ``ReadOnlyRef``).  A table commit reads the pointer, checks the
requirements on the metadata it names, applies the updates, writes the new
metadata file and swaps the pointer with ``Catalog.apply_if`` expecting the
pointer it read; if another writer swapped first, the commit starts over from
the new state (its requirements decide whether it still may), so one of two
appends after the same snapshot fails with 409 and a change that asserts
nothing about what moved succeeds.  Several tables commit in one ``apply_if``:
one staging change, all or nothing.
"""

from __future__ import annotations

import json
import uuid
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from threading import Lock
from typing import TYPE_CHECKING, Any, BinaryIO, Final, Protocol

from lakemount.catalog.model import Entry, Repository, ResolvedRef, upload_entry
from lakemount.errors import NotFound, PreconditionFailed
from lakemount.iceberg import requirements, updates
from lakemount.iceberg.errors import IcebergError, bad_request, commit_failed, no_such_namespace, no_such_table
from lakemount.iceberg.metadata import FORMAT_VERSION, check_version, empty, log_previous, new_table, served
from lakemount.iceberg.names import NAMESPACE_MARKER, TABLE_POINTER, Namespace, TableId, url
from lakemount.table_pointers import VIEW_POINTER

if TYPE_CHECKING:
    from lakemount.catalog.catalog import Listed
    from lakemount.catalog.writer import DataInfo

JSON: Final = "application/json"
COMMIT_ATTEMPTS: Final = 20  # pointer swaps lost to other writers before a commit gives up with 409
PARSED_CACHE: Final = 256  # parsed metadata files, by content address (immutable)


@dataclass(frozen=True, slots=True)
class Loaded:
    """A table as read at a ref: its pointer entry, the metadata file's path and the metadata."""

    table: TableId
    pointer: Entry
    metadata_path: str
    metadata: dict[str, Any]

    def result(self, ref: str | None = None, config: dict[str, str] | None = None) -> dict[str, Any]:
        """The ``LoadTableResult`` at ``ref`` (default: the table's own ref), with the client ``config`` given."""
        ns = self.table.namespace
        at = ref or ns.ref
        location = url(ns.repo, at, self.table.path.rstrip("/"))
        return {"metadata-location": url(ns.repo, at, self.metadata_path),
                "metadata": served(self.metadata, location), "config": dict(config or {})}


@dataclass(frozen=True, slots=True)
class Change:
    """One table's part of a commit: its requirements and updates (already parsed)."""

    table: TableId
    requirements: list[dict[str, Any]]
    updates: list[dict[str, Any]]


def _created_version(changes: list[dict[str, Any]]) -> int:
    """The format version a create transaction starts from: its first ``upgrade-format-version``'s, as the
    reference's (an upgrade to 1 from the default 2 would be a downgrade), else the default."""
    for u in changes:
        if u.get("action") == "upgrade-format-version":
            return check_version(u.get("format-version"), "upgrade-format-version")
    return FORMAT_VERSION


def _dumps(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode()


class TablesCatalog(Protocol):
    """What the Iceberg tables store (and the views and contents beside it) call of the catalog: reads at a ref,
    stored data, and the one conditional swap of pointers (``Catalog`` implements it)."""

    def repository(self, name: str) -> Repository: ...

    def resolve(self, repo: str | Repository, ref: str | ResolvedRef) -> ResolvedRef: ...

    def get_optional(self, repo: str, ref: str | ResolvedRef, path: str) -> Entry | None: ...

    def exists(self, repo: str, ref: str | ResolvedRef, path: str) -> bool: ...

    def list(self, repo: str, ref: str | ResolvedRef, prefix: str = "", *, delimiter: str = "", after: str = "",
             limit: int | None = None) -> Iterator[Listed]: ...

    def read(self, repo: Repository, entry: Entry, offset: int = 0, length: int | None = None) -> bytes: ...

    def write_data(self, repo: str | Repository, source: bytes | BinaryIO | str) -> DataInfo: ...

    def writable_branch(self, repo: str, ref: str | ResolvedRef) -> str: ...

    def apply_if(self, repo: str, ref: str | ResolvedRef, changes: Sequence[tuple[str, Entry | None]],
                 expected: Sequence[tuple[str, Entry | None]]) -> None: ...


class Tables:
    """Iceberg namespaces and tables over one catalog."""

    def __init__(self, catalog: TablesCatalog) -> None:
        self.catalog = catalog
        self._parsed: OrderedDict[str, dict[str, Any]] = OrderedDict()
        self._lock = Lock()

    # ------------------------------------------------------------------ reading
    def _resolve(self, ns: Namespace) -> ResolvedRef:
        try:
            return self.catalog.resolve(ns.repo, ns.ref)
        except NotFound:
            raise no_such_namespace(ns.shown()) from None

    def _json(self, repo: str, entry: Entry, what: str) -> Any:
        with self._lock:
            hit = self._parsed.get(entry.address)
            if hit is not None:
                self._parsed.move_to_end(entry.address)
                return hit
        raw = self.catalog.read(self.catalog.repository(repo), entry)
        try:
            value = json.loads(raw)
        except ValueError:
            raise IcebergError(500, "InternalServerError", f"{what} is not valid JSON") from None
        if not isinstance(value, dict):
            raise IcebergError(500, "InternalServerError", f"{what} is not a JSON object")
        with self._lock:
            self._parsed[entry.address] = value
            while len(self._parsed) > PARSED_CACHE:
                self._parsed.popitem(last=False)
        return value

    def namespace_properties(self, ns: Namespace) -> dict[str, str]:
        """A namespace's properties; 404 ``NoSuchNamespaceException`` if it does not exist."""
        at = self._resolve(ns)
        entry = self.catalog.get_optional(ns.repo, at, ns.marker)
        if entry is None:
            raise no_such_namespace(ns.shown())
        return dict(self._json(ns.repo, entry, f"namespace {ns.shown()}").get("properties", {}))

    def _children(self, repo: str, at: str | ResolvedRef, prefix: str) -> Iterator[tuple[str, str]]:
        """(name, path with '/') of the directories right below ``prefix``."""
        for item in self.catalog.list(repo, at, prefix, delimiter="/"):
            if item.is_prefix:
                yield item.path[len(prefix):-1], item.path

    def child_namespaces(self, repo: str, ref: str, levels: tuple[str, ...]) -> list[tuple[str, ...]]:
        """The namespaces right below ``levels`` at ``ref`` (``()``: the top ones); 404 if ``levels`` is none."""
        parent = Namespace(repo, ref, levels)
        at = self._resolve(parent)
        prefix = parent.path if levels else ""
        if levels and not self.catalog.exists(repo, at, parent.marker):
            raise no_such_namespace(parent.shown())
        return [(*levels, name) for name, path in self._children(repo, at, prefix)
                if self.catalog.exists(repo, at, path + NAMESPACE_MARKER)]

    def table_names(self, ns: Namespace) -> list[str]:
        """The tables of a namespace, in name order; 404 if the namespace does not exist."""
        at = self._resolve(ns)
        if not self.catalog.exists(ns.repo, at, ns.marker):
            raise no_such_namespace(ns.shown())
        return [name for name, path in self._children(ns.repo, at, ns.path)
                if self.catalog.exists(ns.repo, at, path + TABLE_POINTER)]

    def _load_at(self, table: TableId, at: str | ResolvedRef) -> Loaded | None:
        ns = table.namespace
        pointer = self.catalog.get_optional(ns.repo, at, table.pointer)
        if pointer is None:
            if not self.catalog.exists(ns.repo, at, ns.marker):
                raise no_such_namespace(ns.shown())
            return None
        target = self._json(ns.repo, pointer, f"pointer of table {table.shown()}")
        path = target.get("metadata")
        if not isinstance(path, str):
            raise IcebergError(500, "InternalServerError", f"pointer of table {table.shown()} names no metadata file")
        entry = self.catalog.get_optional(ns.repo, at, path)
        if entry is None:
            raise IcebergError(500, "InternalServerError", f"metadata file of table {table.shown()} is missing: {path}")
        return Loaded(table, pointer, path, self._json(ns.repo, entry, f"metadata of table {table.shown()}"))

    def load_at(self, table: TableId, at: str | ResolvedRef) -> Loaded | None:
        """The table as read at ``at`` (a ref expression or one resolved already), None when it has no table there;
        raises 404 ``NoSuchNamespaceException`` when the namespace is none either, 500 for a broken pointer."""
        return self._load_at(table, at)

    def load(self, table: TableId) -> Loaded:
        """The table at its ref; 404 ``NoSuchTableException`` or ``NoSuchNamespaceException``."""
        loaded = self._load_at(table, self._resolve(table.namespace))
        if loaded is None:
            raise no_such_table(table.shown())
        return loaded

    def exists(self, table: TableId) -> bool:
        return self._load_at(table, self._resolve(table.namespace)) is not None

    # ------------------------------------------------------------------ writing
    def _object(self, repo: str, path: str, body: bytes) -> Entry:
        info = self.catalog.write_data(repo, body)
        return upload_entry(info.address, info.size, info.etag, path, JSON, [])

    def _branch(self, ns: Namespace) -> str:
        """The branch a write to ``ns`` goes to (ReadOnlyRef for a tag or commit: 403)."""
        self._resolve(ns)
        return self.catalog.writable_branch(ns.repo, ns.ref)

    def create_namespace(self, ns: Namespace, properties: dict[str, str]) -> None:
        """Create ``ns`` (its parent must exist); 409 ``AlreadyExistsException`` if it does, 404 without a parent."""
        branch = self._branch(ns)
        if len(ns.levels) > 1:
            parent = Namespace(ns.repo, ns.ref, ns.levels[:-1])
            if not self.catalog.exists(ns.repo, branch, parent.marker):
                raise no_such_namespace(parent.shown())
            if self.catalog.exists(ns.repo, branch, parent.path + ns.levels[-1] + "/" + TABLE_POINTER):
                raise IcebergError(409, "AlreadyExistsException", f"a table is named {ns.shown()}")
        marker = self._object(ns.repo, ns.marker, _dumps({"properties": properties}))
        try:
            self.catalog.apply_if(ns.repo, branch, [(ns.marker, marker)], [(ns.marker, None)])
        except PreconditionFailed:
            raise IcebergError(409, "AlreadyExistsException", f"Namespace already exists: {ns.shown()}") from None

    def drop_namespace(self, ns: Namespace) -> None:
        """Drop an empty namespace; 404 if absent, 409 ``NamespaceNotEmptyException`` if it holds tables or namespaces."""
        branch = self._branch(ns)
        marker = self.catalog.get_optional(ns.repo, branch, ns.marker)
        if marker is None:
            raise no_such_namespace(ns.shown())
        if self.table_names(ns) or self.child_namespaces(ns.repo, ns.ref, ns.levels):
            raise IcebergError(409, "NamespaceNotEmptyException", f"Namespace is not empty: {ns.shown()}")
        try:
            self.catalog.apply_if(ns.repo, branch, [(ns.marker, None)], [(ns.marker, marker)])
        except PreconditionFailed:
            raise IcebergError(409, "CommitFailedException", f"namespace {ns.shown()} changed meanwhile; retry") from None

    def update_namespace(self, ns: Namespace, removals: list[str], changes: dict[str, str]) -> dict[str, list[str]]:
        """Set and remove properties; the ``UpdateNamespacePropertiesResponse``; 422 if a key is in both."""
        both = set(removals) & set(changes)
        if both:
            raise IcebergError(422, "UnprocessableEntityException", f"properties both set and removed: {sorted(both)[:10]}")
        branch = self._branch(ns)
        for _ in range(COMMIT_ATTEMPTS):
            marker = self.catalog.get_optional(ns.repo, branch, ns.marker)
            if marker is None:
                raise no_such_namespace(ns.shown())
            props = dict(self._json(ns.repo, marker, f"namespace {ns.shown()}").get("properties", {}))
            removed = [k for k in removals if k in props]
            missing = [k for k in removals if k not in props]
            new = {k: v for k, v in props.items() if k not in removals} | changes
            entry = self._object(ns.repo, ns.marker, _dumps({"properties": new}))
            try:
                self.catalog.apply_if(ns.repo, branch, [(ns.marker, entry)], [(ns.marker, marker)])
            except PreconditionFailed:
                continue
            return {"updated": sorted(changes), "removed": removed, "missing": missing}
        raise commit_failed(f"namespace {ns.shown()} kept changing; retry")

    def _metadata_path(self, table: TableId, meta: dict[str, Any], previous: str | None) -> str:
        version = 0
        if previous is not None:
            head = previous.rsplit("/", 1)[-1].split("-", 1)[0]
            version = int(head) + 1 if head.isdigit() else 0
        return f"{table.path}metadata/{version:05d}-{uuid.uuid4()}.metadata.json"

    def commit(self, changes: Sequence[Change], *, create: dict[str, Any] | None = None) -> list[Loaded]:
        """Commit ``changes`` (tables of one branch) as one staging change; the tables as committed.

        ``create`` (a ``CreateTableRequest``) makes the one change a table creation.  Raises 409
        ``CommitFailedException`` when a requirement does not hold (after re-reading what a concurrent
        writer changed), 400 for malformed updates or tables on several branches, 404 for a missing
        table or namespace, 403 on a tag or commit.
        """
        first = changes[0].table.namespace
        if any((c.table.namespace.repo, c.table.namespace.ref) != (first.repo, first.ref) for c in changes):
            raise bad_request("a transaction commits tables of one repository and ref")
        if len({c.table for c in changes}) != len(changes):
            raise bad_request("a transaction names a table twice")
        branch = self._branch(first)
        for _ in range(COMMIT_ATTEMPTS):
            puts: list[tuple[str, Entry | None]] = []
            expected: list[tuple[str, Entry | None]] = []
            done: list[Loaded] = []
            for c in changes:
                loaded = self._load_at(c.table, branch)
                base: dict[str, Any] | None = None if loaded is None else loaded.metadata
                location = url(first.repo, first.ref, c.table.path.rstrip("/"))
                if create is not None:
                    if loaded is not None:
                        raise IcebergError(409, "AlreadyExistsException", f"Table already exists: {c.table.shown()}")
                    new = new_table(create, location)
                else:
                    requirements.check(base, c.requirements)
                    if base is None:
                        if not requirements.creates(c.requirements):
                            raise no_such_table(c.table.shown())
                        base = empty(location, _created_version(c.updates))
                    new = updates.apply(base, c.updates)
                    if not new.get("schemas"):
                        raise bad_request(f"table {c.table.shown()} would have no schema")
                if loaded is None and self.catalog.exists(first.repo, branch, c.table.path + NAMESPACE_MARKER):
                    raise IcebergError(409, "AlreadyExistsException", f"a namespace is named {c.table.shown()}")
                if loaded is None and self.catalog.exists(first.repo, branch, c.table.path + VIEW_POINTER):
                    raise IcebergError(409, "AlreadyExistsException", f"View with same name already exists: {c.table.shown()}")
                previous = None if loaded is None else loaded.metadata_path
                if loaded is not None:
                    log_previous(new, url(first.repo, first.ref, loaded.metadata_path), loaded.metadata.get("last-updated-ms", 0))
                path = self._metadata_path(c.table, new, previous)
                body = _dumps(new)
                pointer = self._object(first.repo, c.table.pointer,
                                       _dumps({"metadata": path, "table-uuid": new["table-uuid"]}))
                puts += [(path, self._object(first.repo, path, body)), (c.table.pointer, pointer)]
                expected.append((c.table.pointer, None if loaded is None else loaded.pointer))
                done.append(Loaded(c.table, pointer, path, new))
            try:
                self.catalog.apply_if(first.repo, branch, puts, expected)
            except PreconditionFailed:
                continue  # another writer swapped a pointer first: judge the requirements again on its state
            return done
        raise commit_failed("the tables kept changing under this commit; retry")

    def drop(self, table: TableId, *, purge: bool) -> None:
        """Drop a table (its pointer; with ``purge`` every object under its directory); 404 if absent."""
        ns = table.namespace
        branch = self._branch(ns)
        loaded = self._load_at(table, branch)
        if loaded is None:
            raise no_such_table(table.shown())
        doomed: list[tuple[str, Entry | None]] = [(table.pointer, None)]
        if purge:
            doomed += [(item.path, None) for item in self.catalog.list(ns.repo, branch, table.path)
                       if item.path != table.pointer]
        try:
            self.catalog.apply_if(ns.repo, branch, doomed, [(table.pointer, loaded.pointer)])
        except PreconditionFailed:
            raise commit_failed(f"table {table.shown()} changed meanwhile; retry") from None

    def rename(self, source: TableId, dest: TableId) -> None:
        """Move a table's pointer (its files stay where their metadata names them); 404 / 409 as the spec says."""
        sns, dns = source.namespace, dest.namespace
        if (sns.repo, sns.ref) != (dns.repo, dns.ref):
            raise bad_request("a table is renamed within its repository and ref (merge to move it between branches)")
        branch = self._branch(sns)
        loaded = self._load_at(source, branch)
        if loaded is None:
            raise no_such_table(source.shown())
        if not self.catalog.exists(dns.repo, branch, dns.marker):
            raise no_such_namespace(dns.shown())
        if self.catalog.exists(dns.repo, branch, dest.pointer):
            raise IcebergError(409, "AlreadyExistsException", f"Table already exists: {dest.shown()}")
        moved = self._object(sns.repo, dest.pointer, self.catalog.read(self.catalog.repository(sns.repo), loaded.pointer))
        try:
            self.catalog.apply_if(sns.repo, branch, [(source.pointer, None), (dest.pointer, moved)],
                                  [(source.pointer, loaded.pointer), (dest.pointer, None)])
        except PreconditionFailed:
            raise commit_failed(f"table {source.shown()} or {dest.shown()} changed meanwhile; retry") from None

    def register(self, table: TableId, metadata_path: str, *, overwrite: bool) -> Loaded:
        """Point ``table`` at an existing metadata file of its branch; 409 if it exists (unless ``overwrite``)."""
        ns = table.namespace
        branch = self._branch(ns)
        loaded = self._load_at(table, branch)
        if loaded is not None and not overwrite:
            raise IcebergError(409, "AlreadyExistsException", f"Table already exists: {table.shown()}")
        entry = self.catalog.get_optional(ns.repo, branch, metadata_path)
        if entry is None:
            raise bad_request(f"no metadata file at {metadata_path[:200]} on {ns.repo}.{ns.ref}")
        meta = self._json(ns.repo, entry, "the registered metadata file")
        if not isinstance(meta.get("table-uuid"), str) or not isinstance(meta.get("schemas"), list):
            raise bad_request("the registered file is no Iceberg table metadata")
        pointer = self._object(ns.repo, table.pointer, _dumps({"metadata": metadata_path, "table-uuid": meta["table-uuid"]}))
        try:
            self.catalog.apply_if(ns.repo, branch, [(table.pointer, pointer)],
                                  [(table.pointer, None if loaded is None else loaded.pointer)])
        except PreconditionFailed:
            raise commit_failed(f"table {table.shown()} changed meanwhile; retry") from None
        return Loaded(table, pointer, metadata_path, meta)
