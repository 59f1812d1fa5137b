"""Graveler: the versioned key/value core (lakeFS's ``pkg/graveler``), knowing nothing of paths or front ends.

Keys and values are opaque bytes here; the catalog (``lakemount.catalog``) gives
them meaning (paths, entries, content-addressed data) and is the only door
front ends use into this package.  One module per concept:

- ``model``: the records -- typed ids (``CommitID``, ``StagingToken``...), entries,
  ranges, commits, branches, tags, repositories;
- ``sstable``: the table format of committed data (RocksDB block-based SSTables, our own
  reader, ``_sstblock.c`` for its hot loop);
- ``runs``: the commit path's per-record loops over whole runs of records (merge, untag,
  overlay, range cuts), in ``_sstblock.c`` when it is built;
- ``committed``: immutable ranges and metaranges in the block store -- loading and
  storing them verified and cached, writing them, two-way diff and three-way merge;
- ``ports``: the interfaces it consumes (``BlockAdapter``, ``Cache``, ``RefStore``,
  ``StagingStore``, ``ChunkedStagingScan``, ``StagingLists``), implemented in ``lakemount/block``, ``lakemount/cache``,
  ``lakemount/metastore``;
- ``staging``: uncommitted entries as an LSM of immutable staging files on the object store
  (docs/DESIGN.md §4; ``staging.backend = "lsm"``): the file format with its bloom filter, and the
  group-commit writer, reader and compactor over the ref store's per-token lists;
- ``moves``: move records, a directory rename in constant time: a pseudo staging token in the branch
  row that maps one key prefix to another, and the layered reads, scans and commit changes over it;
- ``refexpr``: ref expressions (``main~2``, ``v1``, ``main@``) and what they resolve to;
- ``journal`` and ``recover``: the record of refs kept in the block store, and rebuilding
  a lost ref store from it;
- ``graveler``: the ``Graveler`` facade, which wires the five roles below over those ports and
  hands out their verbs as its own (lakeFS's ``pkg/graveler`` names the same roles);
- ``repos``: repositories, branches, tags, protection rules, ref resolution, commits by id;
- ``reads``: point reads, scans and path lookups at a ref, a branch's staging over its committed tree;
- ``writes``: staging changes (plain, conditional, deletions, prefix moves), resets, branch deletion;
- ``history``: commit, log, the diffs and the merge base;
- ``merges``: merge, cherry-pick, revert and hard reset;
- ``shared``: what the roles share (the ``Stores`` they read, new staging tokens, the swap's ``Backoff``).

It imports nothing of lakemount above it but ``lakemount.errors`` and ``lakemount.records``
(its records' decorator; ``tests/test_layering.py`` checks it); the composition root (``lakemount.app``)
wires its ports.
"""
