"""Batch jobs stay out of storage namespaces: what GC owns is neither imported nor written over.

A repository's storage namespace holds the objects its GC collects.  An
import whose source overlaps a namespace (lies inside one, or contains one)
would stage entries that point at objects another repository's GC -- or this
one's -- deletes once they are unreferenced there: the imported data would
vanish.  An export whose target overlaps a namespace would write files among
a repository's objects.  Both are refused up front (as lakeFS refuses imports
from a storage namespace), naming the repository.

Locations are compared as normalised URLs ending in ``/``: ``local://`` plus
the real path of a local directory, ``s3://bucket/prefix/`` for S3 (``s3a``
is the same store).  Namespaces of other block stores (``mem://``) never
overlap a local directory or an S3 prefix.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from lakemount.errors import InvalidArgument

if TYPE_CHECKING:
    from lakemount.app import App


def local_location(path: str) -> str:
    """The location of local directory ``path`` (symlinks resolved)."""
    return "local://" + os.path.realpath(path).rstrip("/") + "/"


def s3_location(bucket: str, prefix: str = "") -> str:
    """The location of an S3 prefix."""
    prefix = prefix.strip("/")
    return f"s3://{bucket}/{prefix + '/' if prefix else ''}"


def location_of(kind: str, root: str, prefix: str = "") -> str:
    """The location of a job's source or target: ``kind`` ``local`` (``root`` a directory) or ``s3`` (a bucket)."""
    return local_location(root) if kind == "local" else s3_location(root, prefix)


def namespace_location(namespace: str) -> str | None:
    """The location of a storage namespace URL, or ``None`` for a store no job reads or writes."""
    if namespace.startswith("local://"):
        return local_location(namespace[len("local://") :])
    for scheme in ("s3://", "s3a://"):
        if namespace.startswith(scheme):
            bucket, _, prefix = namespace[len(scheme) :].partition("/")
            return s3_location(bucket, prefix)
    return None


def check_outside_namespaces(app: App, location: str, what: str) -> None:
    """Raise ``InvalidArgument`` when ``location`` lies inside, or contains, a repository's storage namespace.

    ``what`` names the location in the message ("import source", "export target").
    """
    for repo in app.catalog.list_repositories():
        ns = namespace_location(repo.storage_namespace)
        if ns is not None and (location.startswith(ns) or ns.startswith(location)):
            relation = "is inside" if location.startswith(ns) else "contains"
            raise InvalidArgument(
                f"{what} {location} {relation} the storage namespace of repository {repo.name} "
                f"({repo.storage_namespace}), whose objects its garbage collection owns"
            )
