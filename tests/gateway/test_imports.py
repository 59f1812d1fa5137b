"""Importing the gateway (and what it builds on) starts nothing: no thread and no thread pool until a request needs one."""

from __future__ import annotations

import json
import subprocess
import sys

# Counts pools built and threads started while every gateway module, and all
# they import (catalog, graveler, block store, auth), is imported (a pool starts
# its threads lazily, so the pools are counted as they are built).
SCRIPT = """
import concurrent.futures, importlib, json, pkgutil, threading
made = []
init = concurrent.futures.ThreadPoolExecutor.__init__
def counting_init(self, *args, **kwargs):
    made.append(kwargs.get("thread_name_prefix", "?"))
    init(self, *args, **kwargs)
concurrent.futures.ThreadPoolExecutor.__init__ = counting_init
import lakemount.gateway as gw
import lakemount.block.landing
names = sorted(m.name for m in pkgutil.walk_packages(gw.__path__, "lakemount.gateway."))
for name in names:
    importlib.import_module(name)
print(json.dumps({"modules": len(names), "pools": made, "threads": threading.active_count()}))
"""


def test_importing_every_gateway_module_starts_no_thread_and_builds_no_pool() -> None:
    out = json.loads(subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, check=True).stdout)
    assert out["modules"] > 40  # the walk found the package, operations and sig included
    assert out["pools"] == [] and out["threads"] == 1
