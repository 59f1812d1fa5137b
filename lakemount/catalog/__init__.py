"""The catalog: the one door front ends use into the versioned core (lakeFS's ``pkg/catalog``).

- ``catalog``: the :class:`~lakemount.catalog.catalog.Catalog` facade, and paths and objects
  (content-addressed data, entries, listings, staging, landing files);
- ``refs``: repositories, branches, tags, protection rules, ref resolution;
- ``history``: commit, merge, revert, cherry-pick, reset, log, diff;
- ``storage``: what jobs that read the stores directly need (ranges of a commit,
  tables read from the block store, recovery of the ref store);
- ``model``: the records front ends name (entries, commits, refs...), re-exported here;
- ``shapes``: the one JSON shape of each object, for the CLI, the mount and the REST API.

The mount, the gateway, the CLI, the jobs and the REST API import these, never
``lakemount.graveler`` (``tests/test_layering.py`` checks it).  Importing this package
loads the record definitions only, so a command that needs only records stays fast.
"""

from lakemount.catalog.model import (
    DIR_MODE,
    EMPTY_METARANGE,
    FILE_MODE,
    LINK_MODE,
    MAX_KEY_BYTES,
    BlockAdapter,
    Branch,
    Commit,
    CommitID,
    Entry,
    ObjectInfo,
    Repository,
    ResolvedRef,
    StagingToken,
    Tag,
    View,
    decode_path,
    decode_value,
    encode_path,
    prefix_end,
)

__all__ = [
    "DIR_MODE",
    "EMPTY_METARANGE",
    "FILE_MODE",
    "LINK_MODE",
    "MAX_KEY_BYTES",
    "BlockAdapter",
    "Branch",
    "Commit",
    "CommitID",
    "Entry",
    "ObjectInfo",
    "Repository",
    "ResolvedRef",
    "StagingToken",
    "Tag",
    "View",
    "decode_path",
    "decode_value",
    "encode_path",
    "prefix_end",
]
