"""How many examples a hypothesis state machine runs: its full count, or a quarter of it in the fast tier.

``scripts/test.sh --fast`` exports ``LAKEMOUNT_TEST_TIER=fast``; the whole suite (``scripts/test.sh``, which CI
runs through ``.ci/run``) does not, and runs every machine's full count (docs/TESTING.md, "The fast tier's
cuts"). A plain ``pytest`` run, which sets nothing, runs the full counts too.
"""

from __future__ import annotations

import os

FAST_SHARE = 4  # the fast tier runs 1/FAST_SHARE of each machine's examples
FAST_MIN = 5  # and never fewer than this


def fast_tier() -> bool:
    return os.environ.get("LAKEMOUNT_TEST_TIER") == "fast"


def examples(full: int) -> int:
    """``full``, or in the fast tier a quarter of it (at least :data:`FAST_MIN`, at most ``full``)."""
    return min(full, max(FAST_MIN, full // FAST_SHARE)) if fast_tier() else full
