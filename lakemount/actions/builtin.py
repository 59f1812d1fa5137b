"""The hook types an action may name, and their implementations.

Imported only where hooks run or action files are checked: the webhook client
and the data checks pull in HTTP, CSV and (on first Parquet check) pyarrow.
"""

from __future__ import annotations

from typing import Final

from lakemount.actions.checks import run_check
from lakemount.actions.hook import HookRunner
from lakemount.actions.webhook import run_webhook

RUNNERS: Final[dict[str, HookRunner]] = {
    "webhook": run_webhook,
    "lakemount_check": run_check,
}
