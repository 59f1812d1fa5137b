"""The catalog: the one door front ends use into the versioned core (lakeFS's ``pkg/catalog``).

- ``catalog``: the :class:`~lakemount.catalog.catalog.Catalog` facade, and paths and objects
  (content-addressed data, entries, listings, staging);
- ``writer``: the object writer, the one way object data is stored (``Catalog.writer``);
- ``refs``: repositories, branches, tags, protection rules, ref resolution;
- ``history``: commit, merge, revert, cherry-pick, reset, log, diff;
- ``storage``: what jobs that read the stores directly need (ranges of a commit,
  tables read from the block store, recovery of the ref store);
- ``gcrules``, ``gcstore``: garbage collection's rules, and its port on one storage namespace
  (``Catalog.gc_store``: what it may list, move and delete, and nothing else);
- ``model``: the records front ends name (entries, commits, refs...), cheap to import;
- ``pulls``, ``events``, ``s3state``: records kept beside the versioned data
  (pull requests, the live feed, the gateway's buckets and multipart uploads)
  and the interfaces ``lakemount/metastore`` implements for them.

Hooks (lakeFS actions) are their own package below this one, ``lakemount/actions``: the
catalog owns their runner (``Catalog.actions``) and calls it from its verbs.

The mount, the gateway, the CLI and the jobs import these, never ``lakemount.graveler``
(``tests/test_layering.py`` checks it).  Importing this package runs nothing: each
module is imported where it is used, so a command that needs only records stays fast.
"""
