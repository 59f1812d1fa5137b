"""Addressing: namespaces ``<repo>.<ref>.<namespace...>``, table names, and where a table lives in its branch.

A namespace ``repo.ref.a.b`` is the directory ``a/b/`` of ``ref`` in ``repo``,
marked by the object ``a/b/_iceberg_namespace.json`` (its properties).  A
table ``t`` in it is the directory ``a/b/t/``: its pointer object
``a/b/t/_iceberg_table.json`` names its current metadata file, metadata files
are ``a/b/t/metadata/<version>-<uuid>.metadata.json`` and clients write data
under ``a/b/t/data/`` (the table's location, ``s3://repo/ref/a/b/t``, goes
through the S3 gateway into the same branch).  A client of the per-ref address
``/iceberg/relative_to/<repo>.<ref>/api`` names namespaces below that ref
(``a.b``); :class:`Base` turns one form into the other.

Names are checked here once: a level must be a single path segment (no ``/``,
no NUL or control character, not ``.`` or ``..``), at most 255 bytes, and may
not start with ``_iceberg`` (the catalog's own objects).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from lakemount.iceberg.errors import bad_request
from lakemount.table_pointers import NAMESPACE_MARKER, RESERVED, TABLE_POINTER

__all__ = ["NAMESPACE_MARKER", "RESERVED", "TABLE_POINTER"]  # the layout's names, decided in lakemount.table_pointers

SEPARATOR: Final = "\x1f"  # multi-level namespaces in a URL, as the spec joins them
MAX_LEVEL_BYTES: Final = 255


def check_level(name: object, what: str = "namespace level") -> str:
    """``name`` if it is a valid namespace level or table name; raises a 400 ``IcebergError``."""
    if not isinstance(name, str) or not name:
        raise bad_request(f"{what} must be a non-empty string")
    if len(name.encode("utf-8", "surrogatepass")) > MAX_LEVEL_BYTES:
        raise bad_request(f"{what} longer than {MAX_LEVEL_BYTES} bytes")
    if name in (".", "..") or "/" in name or any(ord(c) < 0x20 or c == "\x7f" for c in name):
        raise bad_request(f"{what} {name[:80]!r} must be one path segment without '/', control characters, '.' or '..'")
    if any(0xD800 <= ord(c) <= 0xDFFF for c in name):
        raise bad_request(f"{what} is not valid Unicode text")
    if name.startswith(RESERVED):
        raise bad_request(f"{what} {name[:80]!r}: names starting with {RESERVED!r} are the catalog's own")
    return name


def split_levels(raw: str) -> tuple[str, ...]:
    """A namespace from a URL segment or ``parent`` parameter (levels joined by the unit separator)."""
    return tuple(raw.split(SEPARATOR)) if raw else ()


@dataclass(frozen=True, slots=True)
class Namespace:
    """A namespace below a ref: its repository, ref, and levels (at least one)."""

    repo: str
    ref: str
    levels: tuple[str, ...]

    @property
    def path(self) -> str:
        """Its directory in the ref, with a trailing ``/``."""
        return "/".join(self.levels) + "/"

    @property
    def marker(self) -> str:
        return self.path + NAMESPACE_MARKER

    @property
    def full(self) -> tuple[str, ...]:
        return (self.repo, self.ref, *self.levels)

    def shown(self) -> str:
        return ".".join(self.full)


@dataclass(frozen=True, slots=True)
class TableId:
    """A table: its namespace and name."""

    namespace: Namespace
    name: str

    @property
    def path(self) -> str:
        """Its directory in the ref, with a trailing ``/``."""
        return self.namespace.path + self.name + "/"

    @property
    def pointer(self) -> str:
        return self.path + TABLE_POINTER

    def shown(self) -> str:
        return f"{self.namespace.shown()}.{self.name}"


def url(repo: str, ref: str, path: str) -> str:
    """The S3 address of ``path`` at ``ref`` (through the gateway: bucket = repository, key = ref/path)."""
    return f"s3://{repo}/{ref}/{path}"


def path_in(repo: str, location: str) -> str:
    """The path inside a ref of ``location`` (``s3://repo/<ref>/<path>``, any ref, or a plain path); 400 if it is
    in another repository or no valid path."""
    for scheme in ("s3://", "s3a://", "s3n://"):
        if location.startswith(scheme):
            bucket, _, rest = location[len(scheme):].partition("/")
            if bucket != repo:
                raise bad_request(f"location {location[:200]!r} is not in repository {repo}")
            _ref, _, path = rest.partition("/")
            location = path
            break
    else:
        if "://" in location:
            raise bad_request(f"location {location[:200]!r} is not an s3:// address of repository {repo}")
    if not location or location.startswith("/") or any(s in (".", "..", "") for s in location.split("/")):
        raise bad_request(f"location {location[:200]!r} is no valid path")
    return location


@dataclass(frozen=True, slots=True)
class Base:
    """The levels the client's address already fixes: none for ``/iceberg/api``, (repo, ref) for ``relative_to``."""

    levels: tuple[str, ...] = ()

    def full(self, levels: tuple[str, ...]) -> tuple[str, ...]:
        return (*self.levels, *levels)

    def shown(self, full: tuple[str, ...]) -> list[str]:
        """A namespace as this client names it."""
        return list(full[len(self.levels):])

    def namespace(self, levels: tuple[str, ...]) -> Namespace:
        """The namespace a client names; 400 unless it is ``repo.ref.<at least one level>`` with valid levels."""
        full = self.full(levels)
        for level in full:
            check_level(level)
        if len(full) < 3:
            need = "<namespace>" if self.levels else "<repository>.<ref>.<namespace>"
            raise bad_request(f"namespace {'.'.join(levels)[:200]!r}: tables live in namespaces named {need}")
        return Namespace(full[0], full[1], full[2:])

    def table(self, levels: tuple[str, ...], name: object) -> TableId:
        return TableId(self.namespace(levels), check_level(name, "table name"))

    def identifier(self, obj: object) -> TableId:
        """A ``TableIdentifier`` body field (``{"namespace": [...], "name": ...}``); 400 if malformed."""
        if not isinstance(obj, dict) or not isinstance(obj.get("namespace"), list) or "name" not in obj:
            raise bad_request("a table identifier must be {'namespace': [...], 'name': ...}")
        levels = obj["namespace"]
        if not all(isinstance(x, str) for x in levels):
            raise bad_request("namespace levels must be strings")
        return self.table(tuple(levels), obj["name"])
