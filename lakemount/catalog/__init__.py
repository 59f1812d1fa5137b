"""The catalog: objects by path in repositories, the one door front ends use into the versioned core.

Front ends (mount, gateway, CLI, jobs) take ``Catalog`` from ``catalog.py``
and the records its verbs speak in from here, never from ``lakemount.graveler``.
"""

from lakemount.graveler.model import DIR_MODE, FILE_MODE, Branch, Entry, Repository
from lakemount.graveler.refexpr import ResolvedRef

__all__ = ["DIR_MODE", "FILE_MODE", "Branch", "Entry", "Repository", "ResolvedRef"]
