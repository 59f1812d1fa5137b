"""The mount: versioned repositories as POSIX directories over FUSE.

A kernel-free filesystem core turns inode-level operations into catalog calls;
a thin pyfuse3 adapter sits on top; the rest is process plumbing.  One module
per concept:

- ``core``: the filesystem core (``FileSystem``), driven directly by tests; it keeps
  the public operations and delegates each to the part owning its concept:
- ``state``: what the parts share (catalog, inode table, reader, metrics, the non-blocking switch);
- ``scope``: a mounted ref, how fresh our view of it is (``--head-ttl``), and the registry of them;
- ``attributes``: a node's POSIX attributes, computed from what is cached;
- ``tree``: names to nodes: lookup, revalidation, cached listings;
- ``directories``: directory handles (opendir, readdir);
- ``handles``: file handles (open, read, write, flush, release);
- ``saving``: a written file's temp file becoming a staged entry, or kept aside;
- ``scan``: scan-ahead prefetch of the next files of a directory read in order;
- ``metadata``: setattr (chmod, chown, utimens, truncate) and ``user.*`` xattrs;
- ``namespace``: create, mkdir, symlink, unlink, rmdir, rename;
- ``values``: the plain values it takes and returns (``Attr``, ``SetAttr``...);
- ``inodes``: the inode table and node lifetimes;
- ``listing``: directory listings with directory markers, in one pass;
- ``reader``: cached block reads of data objects, with read-ahead and small-file prefetch;
- ``kflags``: the open-reply flags pyfuse3 cannot set (``noflush``, ``cache_readdir``), via ``_kflags.c``;
- ``writes``: the local temp file of a file open for writing;
- ``writeback``: write-back's pipeline: journaled closes uploaded and staged in batches, replay, keeping aside;
- ``journal``: write-back's on-disk journal (checksummed records naming their data files);
- ``control``: ``.lakefs/`` control files (commit, merge, revert, reset...);
- ``stats``: metrics, rendered as Prometheus text for ``.lakefs/stats``;
- ``errno``: the one table from lakemount errors to errnos;
- ``adapter``: the pyfuse3 ``Operations`` over the core;
- ``runner``: one mount's process life (stale cleanup, signals, unmount);
- ``process``: starting a mount in a child process and waiting until it serves;
- ``service``: the mount as a service of ``lakemount up``.

Behaviour is documented, claim by claim with its test, in ``docs/SEMANTICS.md``.
"""

# Before anything imports pyfuse3: the open-reply shim must be bound first (see kflags).
from lakemount.fuse import kflags as _kflags  # noqa: E402,F401
