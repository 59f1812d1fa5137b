"""Configuration: one YAML file plus ``LAKEMOUNT_*`` environment variables over built-in defaults.

Every key ``a.b.c`` can be set by the variable ``LAKEMOUNT_A_B_C``.  Defaults
are the embedded setup: SQLite and a local block store under
``LAKEMOUNT_HOME`` (default ``~/.lakemount``), services on loopback.
Precedence: defaults < file (``--config`` / ``LAKEMOUNT_CONFIG``) < environment.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import yaml

from lakemount.errors import InvalidArgument


def home() -> str:
    return os.path.abspath(os.path.expanduser(os.environ.get("LAKEMOUNT_HOME", "~/.lakemount")))


def defaults(home_dir: str) -> dict[str, Any]:
    return {
        "logging": {"level": "INFO", "file": ""},
        "metadata": {"db": {"url": f"sqlite:///{home_dir}/lakemount.db"}},
        "blockstore": {
            "type": "local",
            "local": {"path": f"{home_dir}/data"},
            "default_namespace_prefix": "",
            "s3": {"endpoint": "", "region": "", "access_key_id": "", "secret_access_key": ""},
        },
        "gateways": {"s3": {"listen_address": "127.0.0.1:8000", "domain_name": "", "region": "us-east-1", "workers": 0, "flat": False,
                           "threads": 32, "aliases": "", "tls": {"cert_file": "", "key_file": ""}}},
        "api": {"listen_address": "127.0.0.1:8001"},
        "cache": {"dir": f"{home_dir}/cache", "ram_bytes": 512 * 1024 * 1024, "disk_bytes": 8 * 1024 * 1024 * 1024},
        "mount": {"path": f"{home_dir}/mnt", "head_ttl": 1.0, "read_ahead_kb": 1024},
        "auth": {"encrypt": {"secret_key": ""}},
    }


def _flatten(d: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, Mapping):
            out.update(_flatten(v, key + "."))
        else:
            out[key] = v
    return out


def _merge(base: dict[str, Any], over: Mapping[str, Any], path: str = "") -> None:
    for k, v in over.items():
        where = f"{path}{k}"
        if isinstance(v, Mapping) and isinstance(base.get(k), dict):
            _merge(base[k], v, where + ".")
        else:
            base[k] = v


def _set(d: dict[str, Any], dotted: str, value: Any) -> None:
    parts = dotted.split(".")
    for p in parts[:-1]:
        d = d.setdefault(p, {})
    d[parts[-1]] = value


def _coerce(value: str, like: Any) -> Any:
    if isinstance(like, bool):
        return value.strip().lower() in ("1", "true", "yes", "on")
    if isinstance(like, int):
        return int(value)
    if isinstance(like, float):
        return float(value)
    return value


@dataclass
class Config:
    home: str
    data: dict[str, Any]

    def get(self, dotted: str) -> Any:
        d: Any = self.data
        for p in dotted.split("."):
            if not isinstance(d, Mapping) or p not in d:
                raise KeyError(dotted)
            d = d[p]
        return d


def load(path: str | None = None, env: Mapping[str, str] | None = None) -> Config:
    """Load the configuration; raises ``InvalidArgument`` for an unreadable file or bad value."""
    env = os.environ if env is None else env
    home_dir = os.path.abspath(os.path.expanduser(env.get("LAKEMOUNT_HOME", "~/.lakemount")))
    data = defaults(home_dir)
    path = path or env.get("LAKEMOUNT_CONFIG")
    if path:
        try:
            with open(path) as f:
                loaded = yaml.safe_load(f) or {}
        except OSError as exc:
            raise InvalidArgument(f"cannot read config {path}: {exc.strerror}") from exc
        except yaml.YAMLError as exc:
            raise InvalidArgument(f"config {path} is not valid YAML: {exc}") from exc
        if not isinstance(loaded, Mapping):
            raise InvalidArgument(f"config {path} must be a mapping")
        _merge(data, copy.deepcopy(dict(loaded)))
    flat = _flatten(defaults(home_dir))
    for key, like in flat.items():
        var = "LAKEMOUNT_" + key.upper().replace(".", "_")
        if var in env:
            try:
                _set(data, key, _coerce(env[var], like))
            except ValueError as exc:
                raise InvalidArgument(f"{var}: {exc}") from exc
    return Config(home_dir, data)
