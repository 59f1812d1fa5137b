"""Batch jobs stay out of storage namespaces: what GC owns is not written over.

A repository's storage namespace holds the objects its GC collects.  An
export whose target overlaps a namespace (lies inside one, or contains one)
would write files among a repository's objects: it is refused up front,
naming the repository.  Imports ask the catalog (``Catalog.import_source``),
which applies the same comparison of locations (``catalog/confinement.py``)
and the configured roots.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from lakemount.catalog.confinement import local_location, location_of, namespace_location, overlap, s3_location
from lakemount.errors import InvalidArgument

if TYPE_CHECKING:
    from lakemount.app import App

__all__ = ["check_outside_namespaces", "local_location", "location_of", "namespace_location", "s3_location"]


def check_outside_namespaces(app: App, location: str, what: str) -> None:
    """Raise ``InvalidArgument`` when ``location`` lies inside, or contains, a repository's storage namespace.

    ``what`` names the location in the message ("export target").
    """
    found = overlap(location, [(r.name, r.storage_namespace) for r in app.catalog.list_repositories()])
    if found is not None:
        raise InvalidArgument(
            f"{what} {location} {found.relation} the storage namespace of repository {found.owner}, "
            f"whose objects its garbage collection owns"
        )
