"""The mount: versioned repositories as POSIX directories over FUSE.

A kernel-free filesystem core turns inode-level operations into catalog calls;
a thin pyfuse3 adapter sits on top; the rest is process plumbing.  One module
per concept:

- ``core``: the filesystem core (``FileSystem``), driven directly by tests;
- ``values``: the plain values it takes and returns (``Attr``, ``SetAttr``...);
- ``inodes``: the inode table and node lifetimes;
- ``scope``: a mounted ref and how fresh our view of it is (``--head-ttl``);
- ``listing``: directory listings with directory markers, in one pass;
- ``reader``: cached block reads of data objects, with read-ahead and small-file prefetch;
- ``kflags``: the open-reply flags pyfuse3 cannot set (``noflush``, ``cache_readdir``), via ``_kflags.c``;
- ``writes``: the local temp file of a file open for writing;
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
