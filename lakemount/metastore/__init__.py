"""The SQL metadata store: refs (branches, tags, commits' heads), staging, and the tables kept beside them: pulls, hook runs, events, multipart uploads, buckets.

It implements the ports graveler and the catalog declare (using only the catalog's records); only `lakemount.app`,
the composition root, builds it. Named for what it holds: `refs` was also the name of a catalog module, an API
module and an App attribute.
"""
