"""The mount process's heap: a large write's request buffers reuse freed memory instead of fresh pages.

pyfuse3 hands each WRITE request to the mount as a new ``bytes`` object, 1 MiB
for ``cp`` or ``dd bs=1M``, which lives until the file's hashing thread has
hashed it (up to ``writes.HASH_QUEUE`` of them at once).  glibc's ``malloc``
serves such a block by ``mmap`` or, past its dynamic threshold, from the heap,
which it gives back to the kernel (``trim``) whenever its free top grows past
twice that threshold; either way a large share of the requests landed on pages
the kernel had to fault in and clear (stop 56: 35,000-74,000 page faults in the
mount per 1 GiB ``cp``, 14% of the mount's CPU, on the request loop that the
writer waits for).  Pinning both thresholds keeps a freed request buffer in the
heap for the next one: after the first few MiB a large write takes no fresh page.
The price is up to ``TRIM_THRESHOLD`` of freed heap kept per malloc arena (the
request loop's is the one large writes grow: 17 MiB more resident after a 1 GiB
``cp``, docs/SCALE.md stop 56).
"""

from __future__ import annotations

import sys
from typing import Final

MMAP_THRESHOLD: Final = 4 << 20  # blocks up to this size come from the heap (a FUSE request is at most 1 MiB)
TRIM_THRESHOLD: Final = 64 << 20  # freed heap kept before it goes back to the kernel (16 queued MiB, and room)
_M_TRIM_THRESHOLD: Final = -1  # <malloc.h>
_M_MMAP_THRESHOLD: Final = -3


def keep_freed_buffers() -> bool:
    """Pin glibc's mmap and trim thresholds for this process (see the module); False where there is no
    glibc ``mallopt`` (another libc, another system), which changes nothing but the cost of a write."""
    if not sys.platform.startswith("linux"):
        return False
    import ctypes  # only the mount process needs it (a CLI verb's import budget)

    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (AttributeError, OSError):
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    # Setting the mmap threshold also ends glibc's moving of both thresholds as blocks are freed.
    return bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD))
