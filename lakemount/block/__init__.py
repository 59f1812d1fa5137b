"""Block adapters: where data objects, ranges, metaranges and commit copies are stored.

Each backend implements graveler's ``BlockAdapter`` for one URL scheme
(``local.py``, ``s3.py``, ``memory.py``; ``flaky.py`` injects failures for
tests) and ``RouterAdapter`` dispatches by scheme.  ``layout.py`` knows where a
storage namespace keeps data objects and tables; ``trash.py`` is GC's trash and
the adapter whose reads fall back to it, ``gcmoves.py`` GC's moves in and out of
it (reached through ``Catalog.gc_store``); ``pools.py`` the lazily made thread pools; ``landing.py`` is the streaming
writer under the catalog's object writer.  :func:`adapter_from_config`
builds the router the composition root hands to graveler.  ``s3.py`` is not
imported here: boto3 is loaded only when an ``s3://`` URL is first used.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from lakemount.block.local import LocalAdapter
from lakemount.block.router import RouterAdapter
from lakemount.block.urls import join_url, scheme_of
from lakemount.errors import InvalidArgument
from lakemount.graveler.ports import BlockAdapter

# The failure-injecting adapter (tests) and the in-memory store (tests and mem:// namespaces): named here,
# imported when asked for (every process opens a store; a CLI verb on local:// needs neither, issue 41).
if TYPE_CHECKING:
    from lakemount.block.flaky import Fault, FaultKind, FlakyAdapter
    from lakemount.block.memory import MemoryAdapter
_LAZY = {"Fault": "flaky", "FaultKind": "flaky", "FlakyAdapter": "flaky", "MemoryAdapter": "memory"}

__all__ = [
    "Fault",
    "FaultKind",
    "FlakyAdapter",
    "LocalAdapter",
    "MemoryAdapter",
    "RouterAdapter",
    "adapter_from_config",
    "join_url",
    "s3_options",
    "scheme_of",
]

BLOCKSTORE_TYPES = ("local", "s3", "mem")

# blockstore.s3.* key -> S3Adapter keyword.  Both the flat form and lakeFS's
# nested ``credentials`` form are accepted.
_S3_KEYS = {
    "endpoint": "endpoint_url",
    "endpoint_url": "endpoint_url",
    "region": "region",
    "access_key_id": "access_key_id",
    "secret_access_key": "secret_access_key",
    "session_token": "session_token",
    "force_path_style": "force_path_style",
    "max_pool_connections": "max_pool_connections",
    "connect_timeout": "connect_timeout",
    "read_timeout": "read_timeout",
    "max_attempts": "max_attempts",
    "pre_signed_expiry": "presign_expiry",
}
_S3_CREDENTIAL_KEYS = ("access_key_id", "secret_access_key", "session_token")


def __getattr__(name: str) -> Any:
    """``Fault``, ``FaultKind`` and ``FlakyAdapter`` from ``flaky.py``, ``MemoryAdapter`` from ``memory.py``, imported
    on first use."""
    module = _LAZY.get(name)
    if module is not None:
        import importlib

        return getattr(importlib.import_module(f"{__name__}.{module}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def s3_options(s3_cfg: Mapping[str, Any]) -> dict[str, Any]:
    """Keyword arguments for ``S3Adapter`` from a ``blockstore.s3`` section.

    Empty values mean "use boto3's default".  Raises ``InvalidArgument`` for an
    unknown key, so that a typo in a configuration file does not silently fall
    back to defaults.
    """
    options: dict[str, Any] = {}
    for key, value in s3_cfg.items():
        if key == "credentials" and isinstance(value, Mapping):
            for ckey, cvalue in value.items():
                if ckey not in _S3_CREDENTIAL_KEYS:
                    raise InvalidArgument(f"unknown key blockstore.s3.credentials.{ckey}")
                if cvalue not in (None, ""):
                    options[ckey] = cvalue
            continue
        if key == "disable_pre_signed":
            if value not in (None, ""):
                options["presign"] = not _coerce(key, value)
            continue
        if key not in _S3_KEYS:
            known = ", ".join(sorted({*_S3_KEYS, "credentials", "disable_pre_signed"}))
            raise InvalidArgument(f"unknown key blockstore.s3.{key} (known: {known})")
        if value not in (None, ""):
            options[_S3_KEYS[key]] = _coerce(key, value)
    return options


def _coerce(key: str, value: Any) -> Any:
    """Values from environment variables arrive as strings; give S3Adapter its types."""
    if key in ("force_path_style", "disable_pre_signed") and isinstance(value, str):
        lowered = value.strip().lower()
        if lowered not in ("true", "1", "yes", "false", "0", "no"):
            raise InvalidArgument(f"blockstore.s3.{key} must be true or false, got {value!r}")
        return lowered in ("true", "1", "yes")
    try:
        if key in ("max_pool_connections", "max_attempts", "pre_signed_expiry"):
            return int(value)
        if key in ("connect_timeout", "read_timeout"):
            return float(value)
    except ValueError:
        raise InvalidArgument(f"blockstore.s3.{key} must be a number, got {value!r}") from None
    return value


def adapter_from_config(cfg: Mapping[str, Any] | None = None) -> RouterAdapter:
    """Build the block adapter for a ``blockstore`` configuration section.

    ``cfg`` looks like ``{"type": "local" | "s3" | "mem", "s3": {"endpoint": ...,
    "region": ..., "access_key_id": ..., "secret_access_key": ...}}``.  The
    router always serves ``local://``, ``mem://`` (a ``MemoryAdapter`` built on first use) and ``s3://``, by an
    ``S3Adapter`` built from ``cfg["s3"]`` on first use.  ``type`` only says
    where new storage namespaces go by default, which is the composition root's
    business; it is validated here.  Other keys (``local.path``,
    ``default_namespace_prefix``) are the composition root's and ignored.  Raises ``InvalidArgument`` for an unknown
    type or S3 key.
    """
    cfg = cfg or {}
    kind = cfg.get("type") or "local"
    if kind not in BLOCKSTORE_TYPES:
        raise InvalidArgument(f"unknown blockstore.type {kind!r} (expected one of {', '.join(BLOCKSTORE_TYPES)})")
    options = s3_options(cfg.get("s3") or {})

    def make_s3() -> BlockAdapter:
        from lakemount.block.s3 import S3Adapter

        return S3Adapter(**options)

    def make_mem() -> BlockAdapter:
        from lakemount.block.memory import MemoryAdapter

        return MemoryAdapter()

    return RouterAdapter(adapters={"local": LocalAdapter()}, factories={"s3": make_s3, "mem": make_mem})
