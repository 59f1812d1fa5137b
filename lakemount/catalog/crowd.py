"""The group commit's crowd count (``graveler.staging.crowd``), for a front end that groups writes of its own.

The mount's closes without write-back go in one staging per group (``fuse/closes.py``), and its leader waits for as
many as were in flight at once lately, as the staging backends' leaders do for their writes: the same count, handed
out here because a front end imports the catalog, never graveler.
"""

from __future__ import annotations

from lakemount.graveler.staging.crowd import HORIZON_S, Crowd

__all__ = ["HORIZON_S", "Crowd"]
