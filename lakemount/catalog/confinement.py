"""Confinement: which local files the server may touch on a user's behalf, decided in one place.

The server runs with rights its users lack (often root), so a location a user
names -- an import source, a new repository's storage namespace -- must lie
where the operator allowed: under ``blockstore.local.import_roots`` for an
import, ``blockstore.local.namespace_roots`` for a ``local://`` namespace
(both default to the local block store's directory).  Paths are compared after
``os.path.realpath``, so ``..`` and symlinks are resolved first: a symlink
inside a root that points outside it leads outside, and is refused.  S3 and
other stores are bounded by the server's credentials there, not by roots.

What the server owns is off limits as well: a location overlaps another when
one lies inside the other.  A new namespace never overlaps an existing
repository's namespace or the server's own store (the journal ``recover``
reads); an import never reads from one (their objects belong to a garbage
collection).  lakeFS has the same idea as ``blockstore.local.import_enabled``
and ``allowed_external_prefixes``, compared as text; here the comparison is
by path component (``/data2`` is not under ``/data``).

Refusals say what the user typed, never where it resolved to: a resolved path
would tell them about the server's filesystem.  Every front end reaches this
through the catalog (``Catalog.import_source``, ``Catalog.create_repository``).
"""

from __future__ import annotations

import os
from collections.abc import Iterable

from lakemount.errors import AlreadyExists, InvalidArgument, NotFound, OutsideRoots
from lakemount.records import record

__all__ = [
    "Confinement",
    "ImportSource",
    "Overlap",
    "local_location",
    "location_of",
    "namespace_location",
    "overlap",
    "s3_location",
]


@record(frozen=True, slots=True)
class Overlap:
    """``location`` lies inside (``relation`` "is inside") or around ("contains") ``owner``'s location;
    ``owner`` is a repository's name, or None for the server's own store."""

    relation: str
    owner: str | None


# ---------------------------------------------------------------------------- locations
def local_location(path: str) -> str:
    """The location of local directory ``path`` (``..`` and symlinks resolved), as ``local:///real/path/``."""
    return "local://" + os.path.realpath(path).rstrip("/") + "/"


def s3_location(bucket: str, prefix: str = "") -> str:
    """The location of an S3 prefix."""
    prefix = prefix.strip("/")
    return f"s3://{bucket}/{prefix + '/' if prefix else ''}"


def location_of(kind: str, root: str, prefix: str = "") -> str:
    """The location of a job's source or target: ``kind`` ``local`` (``root`` a directory) or ``s3`` (a bucket)."""
    return local_location(root) if kind == "local" else s3_location(root, prefix)


def namespace_location(namespace: str) -> str | None:
    """The location of a storage namespace URL (``s3a`` is ``s3``), None for a store no job reads or writes."""
    if namespace.startswith("local://"):
        return local_location(namespace[len("local://") :])
    for scheme in ("s3://", "s3a://"):
        if namespace.startswith(scheme):
            bucket, _, prefix = namespace[len(scheme) :].partition("/")
            return s3_location(bucket, prefix)
    return None


def _any_location(namespace: str) -> str:
    """A namespace URL of any store as a location: local and S3 ones normalised, others as written plus ``/``."""
    return namespace_location(namespace) or namespace.rstrip("/") + "/"


def overlap(location: str, owned: Iterable[tuple[str | None, str]]) -> Overlap | None:
    """How ``location`` overlaps the first of ``owned`` (owner, namespace URL) it meets, None if it overlaps none."""
    for owner, namespace in owned:
        ns = _any_location(namespace)
        if location.startswith(ns):
            return Overlap("is inside", owner)
        if ns.startswith(location):
            return Overlap("contains", owner)
    return None


def _within(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


# ---------------------------------------------------------------------------- import sources
@record(frozen=True, slots=True)
class ImportSource:
    """Where objects are imported from: a local directory (its real path) or an S3 prefix (ending in ``/`` or empty),
    or with ``name``, the one object of that name in it (lakeFS's ``object`` import location)."""

    kind: str  # "local" | "s3"
    root: str  # local: the directory's real path; s3: the bucket
    prefix: str = ""  # s3 only
    name: str = ""  # one object only

    @property
    def url(self) -> str:
        if self.kind == "local":
            return f"local://{self.root}/{self.name}"
        return f"s3://{self.root}/{self.prefix}{self.name}"

    @property
    def location(self) -> str:
        if self.name:  # the object's own location: what lies beside it is not read
            return location_of(self.kind, f"{self.root}/{self.name}") if self.kind == "local" else s3_location(self.root, self.prefix + self.name)
        return location_of(self.kind, self.root, self.prefix)


def split_location(text: str, verb: str, role: str) -> tuple[str, str, str]:
    """What a job's source or target ``text`` names: ``("s3", bucket, prefix)`` for ``s3://`` and ``s3a://``
    (the prefix empty or ending in ``/``), or ``("local", path, "")`` for a path, bare or after ``local://``
    or ``file://`` (as written; after a scheme it must be absolute).  ``verb`` ("import from") and ``role``
    ("source") word the refusals: ``InvalidArgument`` for another scheme, a relative path after a scheme,
    an S3 URL without a bucket."""
    if text.startswith(("s3://", "s3a://")):
        bucket, _, prefix = text.partition("://")[2].partition("/")
        if not bucket:
            raise InvalidArgument(f"s3 URL without a bucket: {text!r}")
        prefix = prefix.lstrip("/")
        if prefix and not prefix.endswith("/"):
            prefix += "/"
        return "s3", bucket, prefix
    for scheme in ("local://", "file://"):
        if text.startswith(scheme):
            path = text[len(scheme) :]
            if not path.startswith("/"):
                raise InvalidArgument(f"{scheme} {role} must be an absolute path: {text}")
            return "local", path, ""
    if "://" in text:
        raise InvalidArgument(f"cannot {verb} {text!r}: use a local directory or s3://bucket/prefix")
    return "local", text, ""


# ---------------------------------------------------------------------------- the rule
@record(frozen=True, slots=True)
class Confinement:
    """The directories imports may read (``import_roots``) and ``local://`` namespaces may lie in
    (``namespace_roots``), absolute paths; ``system`` is the namespace URL of the server's own store."""

    import_roots: tuple[str, ...]
    namespace_roots: tuple[str, ...]
    system: str = ""

    def _inside(self, path: str, roots: tuple[str, ...]) -> bool:
        # Roots are resolved at each check: one may be created, or be a symlink, after start-up.
        real = os.path.realpath(path)
        return any(_within(real, os.path.realpath(root)) for root in roots)

    def _owned(self, repositories: Iterable[tuple[str, str]]) -> list[tuple[str | None, str]]:
        owned: list[tuple[str | None, str]] = [(name, ns) for name, ns in repositories]
        if self.system:
            owned.append((None, self.system))
        return owned

    def import_source(self, text: str, repositories: Iterable[tuple[str, str]], *, single: bool = False) -> ImportSource:
        """The source ``text`` names (``/dir``, ``file:///dir``, ``local:///dir``, ``s3://bucket/prefix``), once allowed;
        with ``single``, the one object it names (``local:///dir/file``, ``s3://bucket/key``), under the same rules.

        ``repositories`` are (name, storage namespace) of every repository.  Raises
        ``OutsideRoots`` for a local directory outside ``import_roots`` (checked
        before anything about it is revealed: whether it exists, what it is),
        ``NotFound`` for a missing one, ``InvalidArgument`` for a file, another
        scheme, or a source that overlaps a repository's namespace or the
        server's store.
        """
        kind, path, prefix = split_location(text, "import from", "source")
        if kind == "s3":
            if single:
                key = prefix.removesuffix("/")
                if not key or text.endswith("/"):
                    raise InvalidArgument(f"an object import names one object (s3://bucket/key): {text}")
                parent, _, name = key.rpartition("/")
                source = ImportSource("s3", path, parent + "/" if parent else "", name)
            else:
                source = ImportSource("s3", path, prefix)
        else:
            if not self._inside(path, self.import_roots):
                raise OutsideRoots("import source", text, "blockstore.local.import_roots")
            real = os.path.realpath(path)
            if not os.path.exists(real):
                raise NotFound(f"source {'object' if single else 'directory'} does not exist: {text}")
            if single:
                if not os.path.isfile(real):
                    raise InvalidArgument(f"source is not a regular file: {text}")
                source = ImportSource("local", os.path.dirname(real), name=os.path.basename(real))
            else:
                if not os.path.isdir(real):
                    raise InvalidArgument(f"source is not a directory: {text}")
                if real == "/":
                    raise InvalidArgument("refusing to import the root directory")
                source = ImportSource("local", real)
        found = overlap(source.location, self._owned(repositories))
        if found is not None:
            whose = f"repository {found.owner}" if found.owner else "the server's own store"
            raise InvalidArgument(
                f"import source {text} {found.relation} the storage namespace of {whose}, "
                f"whose objects its garbage collection owns"
            )
        return source

    def check_namespace(self, namespace: str, shown: str, repositories: Iterable[tuple[str, str]]) -> None:
        """Raise unless a new repository may use storage namespace ``namespace`` (``shown``: how the user named it).

        Raises ``OutsideRoots`` for a ``local://`` namespace outside
        ``namespace_roots``, ``AlreadyExists`` for one another repository
        uses, ``InvalidArgument`` for one inside or around another repository's
        or the server's own store.
        """
        path = namespace[len("local://") :] if namespace.startswith("local://") else ""
        # An empty path names no place: the repository's creator refuses it as a malformed URL.
        if path.strip("/") and not self._inside(path, self.namespace_roots):
            raise OutsideRoots("storage namespace", shown, "blockstore.local.namespace_roots")
        location = _any_location(namespace)
        for owner, other in self._owned(repositories):
            if _any_location(other) == location:
                taken = "another repository" if owner else "the server's own store"
                raise AlreadyExists(f"storage namespace {shown} is used by {taken}")
        found = overlap(location, self._owned(repositories))
        if found is not None:
            whose = "another repository's storage namespace" if found.owner else "the server's own store"
            raise InvalidArgument(f"storage namespace {shown} {found.relation} {whose}")
