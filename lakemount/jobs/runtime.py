"""The executor side of a job: one ``App`` per worker process, built from the driver's configuration.

Executors are separate processes (on other machines, in a cluster), so they
cannot share the driver's stores; they get its :class:`~lakemount.config.Config`
(frozen plain data, pickled with each task) and open their own ``App`` from it.
PySpark reuses worker processes between tasks, so the app, its SQL engine
and its block clients are built once per worker, not once per task.
"""

from __future__ import annotations

import dataclasses
import json
import threading

from lakemount.app import App
from lakemount.config import Config

_lock = threading.Lock()
_apps: dict[str, App] = {}


def _key(config: Config) -> str:
    return json.dumps(dataclasses.asdict(config), sort_keys=True, default=str)


def app_for(config: Config) -> App:
    """The worker's ``App`` for ``config`` (built on first use)."""
    key = _key(config)
    app = _apps.get(key)
    if app is None:
        with _lock:
            app = _apps.get(key)
            if app is None:
                app = _apps[key] = App(config)
    return app
