"""Iceberg views (the REST spec's ``/views`` routes): view metadata as JSON dicts, stored in a branch like tables.

A view ``v`` of namespace ``db`` is the directory ``db/v/`` of its ref, whose pointer
``db/v/_iceberg_view.json`` names the current metadata file ``db/v/metadata/<n>-<uuid>.metadata.json``
(format version 1 of the view spec: ``view-uuid``, ``versions``, ``version-log``, ``schemas``,
``current-version-id``, ``properties``).  So a view branches, merges and travels in time as a
table does, and two branches that both replaced it conflict on its pointer (the merge names the
view).  A name is a table's or a view's, never both (409 ``AlreadyExistsException``).

Every field read from a client is checked first: a malformed version or representation, two
queries of one dialect in a version, or an unknown update is a 400, never a crash.  A replace
(``add-view-version`` then ``set-current-view-version`` ``-1``: the one just added) reuses an
equal version already there, as the reference does.
"""

from __future__ import annotations

import copy
import uuid
from collections.abc import Callable
from typing import Any, Final

from lakemount.catalog.model import Entry, ResolvedRef
from lakemount.errors import PreconditionFailed
from lakemount.iceberg.errors import IcebergError, bad_request, commit_failed, no_such_namespace
from lakemount.iceberg.metadata import check_schema, string_map, want
from lakemount.iceberg.names import Namespace, TableId, url
from lakemount.iceberg.tables import COMMIT_ATTEMPTS, Tables, _dumps
from lakemount.table_pointers import TABLE_POINTER, VIEW_POINTER

VIEW_FORMAT_VERSION: Final = 1
LAST_ADDED: Final = -1


def no_such_view(shown: str) -> IcebergError:
    """404 ``NoSuchViewException``."""
    return IcebergError(404, "NoSuchViewException", f"View does not exist: {shown}")


def pointer(view: TableId) -> str:
    """The path of a view's pointer object."""
    return view.path + VIEW_POINTER


def check_view_version(version: Any) -> dict[str, Any]:
    """A ``ViewVersion`` as sent; 400 for a malformed one (representations: SQL, one query per dialect)."""
    want(version, "version-id", int, "view version")
    want(version, "timestamp-ms", int, "view version")
    want(version, "schema-id", int, "view version")
    string_map(want(version, "summary", dict, "view version"), "view version summary")
    namespace = want(version, "default-namespace", list, "view version")
    if not all(isinstance(x, str) for x in namespace):
        raise bad_request("view version: 'default-namespace' must be a list of strings")
    want(version, "default-catalog", str, "view version", optional=True)
    reps = want(version, "representations", list, "view version")
    if not reps:
        raise bad_request("Invalid view version: a version needs at least one representation")
    dialects: set[str] = set()
    for rep in reps:
        kind = want(rep, "type", str, "view representation")
        if kind.lower() != "sql":
            raise bad_request(f"unknown view representation type {kind[:40]!r} (sql)")
        want(rep, "sql", str, "view representation")
        dialect = want(rep, "dialect", str, "view representation")
        if not dialect.strip():
            raise bad_request("view representation: 'dialect' must not be empty")
        if dialect.lower() in dialects:
            raise bad_request(f"Invalid view version: Cannot add multiple queries for dialect {dialect.lower()[:40]}")
        dialects.add(dialect.lower())
    return dict(version)


def new_view(request: dict[str, Any], location: str) -> dict[str, Any]:
    """The first metadata of a view from a ``CreateViewRequest``; 400 if malformed."""
    schema = want(request, "schema", dict, "create view request")
    check_schema(schema)
    schema = {**schema, "schema-id": 0}
    version = check_view_version(want(request, "view-version", dict, "create view request"))
    version = {**version, "version-id": 1, "schema-id": 0}
    return {
        "view-uuid": str(uuid.uuid4()), "format-version": VIEW_FORMAT_VERSION, "location": location,
        "current-version-id": 1, "versions": [version],
        "version-log": [{"version-id": 1, "timestamp-ms": version["timestamp-ms"]}],
        "schemas": [schema], "properties": string_map(request.get("properties"), "properties"),
    }


class _Commit:
    def __init__(self, meta: dict[str, Any]) -> None:
        self.meta = meta
        self.last_schema: int | None = None
        self.last_version: int | None = None


def _assign_uuid(c: _Commit, u: dict[str, Any]) -> None:
    c.meta["view-uuid"] = want(u, "uuid", str, "assign-uuid")


def _upgrade(c: _Commit, u: dict[str, Any]) -> None:
    if want(u, "format-version", int, "upgrade-format-version") != VIEW_FORMAT_VERSION:
        raise bad_request(f"view format-version {u['format-version']} is not supported (views are version 1)")


def _add_schema(c: _Commit, u: dict[str, Any]) -> None:
    schema = want(u, "schema", dict, "add-schema")
    check_schema(schema)
    body = {k: v for k, v in schema.items() if k != "schema-id"}
    for existing in c.meta["schemas"]:
        if {k: v for k, v in existing.items() if k != "schema-id"} == body:
            c.last_schema = existing["schema-id"]
            return
    new_id = max((s["schema-id"] for s in c.meta["schemas"]), default=-1) + 1
    c.meta["schemas"] = [*c.meta["schemas"], {**schema, "schema-id": new_id}]
    c.last_schema = new_id


def _add_version(c: _Commit, u: dict[str, Any]) -> None:
    version = check_view_version(want(u, "view-version", dict, "add-view-version"))
    if version["schema-id"] == LAST_ADDED:
        if c.last_schema is None:
            raise bad_request("add-view-version: schema-id -1 (the last added) but this commit added no schema")
        version["schema-id"] = c.last_schema
    if version["schema-id"] not in {s["schema-id"] for s in c.meta["schemas"]}:
        raise bad_request(f"add-view-version: no schema {version['schema-id']}")

    def same(v: dict[str, Any]) -> dict[str, Any]:
        return {k: x for k, x in v.items() if k not in ("version-id", "timestamp-ms")}

    for existing in c.meta["versions"]:  # the same version again is the one already there
        if same(existing) == same(version):
            c.last_version = existing["version-id"]
            return
    new_id = max((v["version-id"] for v in c.meta["versions"]), default=0) + 1
    c.meta["versions"] = [*c.meta["versions"], {**version, "version-id": new_id}]
    c.last_version = new_id


def _set_version(c: _Commit, u: dict[str, Any]) -> None:
    vid = want(u, "view-version-id", int, "set-current-view-version")
    if vid == LAST_ADDED:
        if c.last_version is None:
            raise bad_request("set-current-view-version -1 (the last added) but this commit added none")
        vid = c.last_version
    version = next((v for v in c.meta["versions"] if v["version-id"] == vid), None)
    if version is None:
        raise bad_request(f"set-current-view-version: no view version {vid}")
    c.meta["current-version-id"] = vid
    c.meta["version-log"] = [*c.meta["version-log"], {"version-id": vid, "timestamp-ms": version["timestamp-ms"]}]


def _set_location(c: _Commit, u: dict[str, Any]) -> None:
    want(u, "location", str, "set-location")  # accepted, not kept: a view's location is its place in the branch


def _set_properties(c: _Commit, u: dict[str, Any]) -> None:
    c.meta["properties"] = {**c.meta["properties"], **string_map(want(u, "updates", dict, "set-properties"), "updates")}


def _remove_properties(c: _Commit, u: dict[str, Any]) -> None:
    gone = want(u, "removals", list, "remove-properties")
    if not all(isinstance(x, str) for x in gone):
        raise bad_request("remove-properties: 'removals' must be strings")
    c.meta["properties"] = {k: v for k, v in c.meta["properties"].items() if k not in set(gone)}


APPLY: Final[dict[str, Callable[[_Commit, dict[str, Any]], None]]] = {
    "assign-uuid": _assign_uuid,
    "upgrade-format-version": _upgrade,
    "add-schema": _add_schema,
    "set-location": _set_location,
    "set-properties": _set_properties,
    "remove-properties": _remove_properties,
    "add-view-version": _add_version,
    "set-current-view-version": _set_version,
}


def parse(body: Any) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(requirements, updates) of a ``CommitViewRequest``; 400 for an unknown or malformed one."""
    reqs = want(body, "requirements", list, "commit view request") if body.get("requirements") is not None else []
    for r in reqs:
        if want(r, "type", str, "a requirement") != "assert-view-uuid":
            raise bad_request(f"unknown view requirement type {str(r.get('type'))[:60]!r}")
        want(r, "uuid", str, "assert-view-uuid")
    ups = want(body, "updates", list, "commit view request")
    for u in ups:
        action = want(u, "action", str, "an update")
        if action not in APPLY:
            raise bad_request(f"unsupported view update action {action[:60]!r}")
    return reqs, ups


def apply(meta: dict[str, Any], requirements: list[dict[str, Any]], updates: list[dict[str, Any]]) -> dict[str, Any]:
    """New view metadata: ``requirements`` checked (409 with the reference's words), ``updates`` applied to a copy."""
    for r in requirements:
        if r["uuid"].lower() != str(meta.get("view-uuid")).lower():
            raise commit_failed(f"Requirement failed: view UUID does not match: expected {meta.get('view-uuid')} != {r['uuid']}")
    c = _Commit(copy.deepcopy(meta))
    for u in updates:
        try:
            APPLY[u["action"]](c, u)
        except (KeyError, TypeError, AttributeError) as e:
            raise bad_request(f"{u['action']}: the view's metadata lacks or mistypes {str(e)[:80]}") from None
    return c.meta


class Views:
    """Iceberg views over the catalog, stored beside the tables of ``tables`` (whose readers they share)."""

    def __init__(self, tables: Tables) -> None:
        self.tables = tables
        self.catalog = tables.catalog

    def _load_at(self, view: TableId, at: str | ResolvedRef) -> tuple[Entry, str, dict[str, Any]] | None:
        ns = view.namespace
        entry = self.catalog.get_optional(ns.repo, at, pointer(view))
        if entry is None:
            if not self.catalog.exists(ns.repo, at, ns.marker):
                raise no_such_namespace(ns.shown())
            return None
        target = self.tables._json(ns.repo, entry, f"pointer of view {view.shown()}")
        path = target.get("metadata")
        meta_entry = self.catalog.get_optional(ns.repo, at, path) if isinstance(path, str) else None
        if meta_entry is None:
            raise IcebergError(500, "InternalServerError", f"metadata file of view {view.shown()} is missing")
        return entry, path, self.tables._json(ns.repo, meta_entry, f"metadata of view {view.shown()}")

    def result(self, view: TableId, path: str, meta: dict[str, Any], config: dict[str, str]) -> dict[str, Any]:
        """The ``LoadViewResult``: located at the ref it was read from."""
        ns = view.namespace
        return {"metadata-location": url(ns.repo, ns.ref, path),
                "metadata": {**meta, "location": url(ns.repo, ns.ref, view.path.rstrip("/"))}, "config": dict(config)}

    def load(self, view: TableId) -> tuple[str, dict[str, Any]]:
        """(metadata path, metadata) of a view at its ref; 404 ``NoSuchViewException`` or ``NoSuchNamespaceException``."""
        loaded = self._load_at(view, self.tables._resolve(view.namespace))
        if loaded is None:
            raise no_such_view(view.shown())
        return loaded[1], loaded[2]

    def names(self, ns: Namespace) -> list[str]:
        """The views of a namespace, in name order; 404 if it does not exist."""
        at = self.tables._resolve(ns)
        if not self.catalog.exists(ns.repo, at, ns.marker):
            raise no_such_namespace(ns.shown())
        return [name for name, path in self.tables._children(ns.repo, at, ns.path)
                if self.catalog.exists(ns.repo, at, path + VIEW_POINTER)]

    def _write(self, view: TableId, branch: str, meta: dict[str, Any], loaded: tuple[Entry, str, dict[str, Any]] | None,
               *, path: str | None = None) -> str:
        """Stage ``meta`` (or point at the existing file ``path``) as the view's current metadata, if its pointer is
        still what was read; returns the metadata path, raises ``PreconditionFailed`` if another writer moved it."""
        ns = view.namespace
        puts: list[tuple[str, Entry | None]] = []
        if path is None:
            number = 0
            if loaded is not None:
                head = loaded[1].rsplit("/", 1)[-1].split("-", 1)[0]
                number = int(head) + 1 if head.isdigit() else 0
            path = f"{view.path}metadata/{number:05d}-{uuid.uuid4()}.metadata.json"
            puts.append((path, self.tables._object(ns.repo, path, _dumps(meta))))
        puts.append((pointer(view), self.tables._object(ns.repo, pointer(view), _dumps({"metadata": path, "view-uuid": meta.get("view-uuid")}))))
        expected: list[tuple[str, Entry | None]] = [(pointer(view), None if loaded is None else loaded[0])]
        if loaded is None:
            expected.append((view.path + TABLE_POINTER, None))  # a table made meanwhile under the name wins
        self.catalog.apply_if(ns.repo, branch, puts, expected)
        return path

    def _free(self, view: TableId, branch: str) -> None:
        """409 if a table or namespace has the view's name."""
        ns = view.namespace
        if self.catalog.exists(ns.repo, branch, view.path + TABLE_POINTER):
            raise IcebergError(409, "AlreadyExistsException", f"Table with same name already exists: {view.shown()}")
        if self.catalog.exists(ns.repo, branch, view.path + "_iceberg_namespace.json"):
            raise IcebergError(409, "AlreadyExistsException", f"a namespace is named {view.shown()}")

    def create(self, view: TableId, request: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        """Create a view from a ``CreateViewRequest``; 409 if a view or table has its name."""
        branch = self.tables._branch(view.namespace)
        location = url(view.namespace.repo, view.namespace.ref, view.path.rstrip("/"))
        meta = new_view(request, location)
        if self._load_at(view, branch) is not None:
            raise IcebergError(409, "AlreadyExistsException", f"View already exists: {view.shown()}")
        self._free(view, branch)
        try:
            return self._write(view, branch, meta, None), meta
        except PreconditionFailed:
            raise IcebergError(409, "AlreadyExistsException", f"View already exists: {view.shown()}") from None

    def commit(self, view: TableId, requirements: list[dict[str, Any]], updates: list[dict[str, Any]]) -> tuple[str, dict[str, Any]]:
        """Replace a view (new versions, properties); 404 if absent, 409 on a failed requirement, 400 if malformed."""
        branch = self.tables._branch(view.namespace)
        for _ in range(COMMIT_ATTEMPTS):
            loaded = self._load_at(view, branch)
            if loaded is None:
                raise no_such_view(view.shown())
            meta = apply(loaded[2], requirements, updates)
            try:
                return self._write(view, branch, meta, loaded), meta
            except PreconditionFailed:
                continue  # another writer replaced it first: judge the requirements again
        raise commit_failed(f"view {view.shown()} kept changing; retry")

    def drop(self, view: TableId) -> None:
        """Drop a view (its pointer); 404 if absent."""
        ns = view.namespace
        branch = self.tables._branch(ns)
        loaded = self._load_at(view, branch)
        if loaded is None:
            raise no_such_view(view.shown())
        try:
            self.catalog.apply_if(ns.repo, branch, [(pointer(view), None)], [(pointer(view), loaded[0])])
        except PreconditionFailed:
            raise commit_failed(f"view {view.shown()} changed meanwhile; retry") from None

    def rename(self, source: TableId, dest: TableId) -> None:
        """Move a view's pointer within its repository and ref; 404 / 409 as for tables."""
        sns, dns = source.namespace, dest.namespace
        if (sns.repo, sns.ref) != (dns.repo, dns.ref):
            raise bad_request("a view is renamed within its repository and ref (merge to move it between branches)")
        branch = self.tables._branch(sns)
        loaded = self._load_at(source, branch)
        if loaded is None:
            raise no_such_view(source.shown())
        if not self.catalog.exists(dns.repo, branch, dns.marker):
            raise no_such_namespace(dns.shown())
        if self.catalog.exists(dns.repo, branch, pointer(dest)):
            raise IcebergError(409, "AlreadyExistsException", f"View already exists: {dest.shown()}")
        self._free(dest, branch)
        moved = self.tables._object(sns.repo, pointer(dest), self.catalog.read(self.catalog.repository(sns.repo), loaded[0]))
        try:
            self.catalog.apply_if(sns.repo, branch, [(pointer(source), None), (pointer(dest), moved)],
                                  [(pointer(source), loaded[0]), (pointer(dest), None), (dest.path + TABLE_POINTER, None)])
        except PreconditionFailed:
            raise commit_failed(f"view {source.shown()} or {dest.shown()} changed meanwhile; retry") from None

    def register(self, view: TableId, metadata_path: str) -> tuple[str, dict[str, Any]]:
        """Point a new view at an existing view metadata file of its branch; 409 if the name is taken."""
        ns = view.namespace
        branch = self.tables._branch(ns)
        if self._load_at(view, branch) is not None:
            raise IcebergError(409, "AlreadyExistsException", f"View already exists: {view.shown()}")
        self._free(view, branch)
        entry = self.catalog.get_optional(ns.repo, branch, metadata_path)
        if entry is None:
            raise bad_request(f"no metadata file at {metadata_path[:200]} on {ns.repo}.{ns.ref}")
        meta = self.tables._json(ns.repo, entry, "the registered metadata file")
        if not isinstance(meta.get("view-uuid"), str) or not isinstance(meta.get("versions"), list):
            raise bad_request("the registered file is no Iceberg view metadata")
        try:
            return self._write(view, branch, meta, None, path=metadata_path), meta
        except PreconditionFailed:
            raise IcebergError(409, "AlreadyExistsException", f"View already exists: {view.shown()}") from None
