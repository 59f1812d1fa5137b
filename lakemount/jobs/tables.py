"""The layout of a storage namespace GC relies on, and what it makes of the addresses in records.

Anything else in a namespace is left alone: ``data/<aa>/<sha256>`` for data
objects and ``_lakefs/<64 hex>`` for tables.  Tables themselves are read
straight from the block store with :mod:`lakemount.catalog.storage`
(``read_table``, ``metarange_ranges``, ``value_address``).
"""

from __future__ import annotations

import re
from typing import Final

HEX64: Final = re.compile(r"[0-9a-f]{64}")
DATA_PREFIX: Final = "data/"
TABLE_PREFIX: Final = "_lakefs/"


def namespace_key(address: str, namespace: str) -> str | None:
    """``address`` relative to ``namespace``; None for an absolute URL elsewhere (imported data)."""
    if "://" not in address:
        return address
    root = namespace.rstrip("/") + "/"
    if address.startswith(root):
        return address[len(root) :]
    return None


def data_sha(key: str) -> str | None:
    """The sha256 of a ``data/<aa>/<sha256>`` key, None for any other key.

    Only the shape is checked here (cheap, per record); candidates for deletion
    are validated strictly when listed, so a malformed live key can only keep
    something, never delete it.
    """
    if len(key) == 72 and key.startswith(DATA_PREFIX) and key[7] == "/" and key[5:7] == key[8:10]:
        return key[8:]
    return None


def is_data_name(prefix2: str, name: str) -> bool:
    """Whether ``name`` listed under ``data/<prefix2>/`` is a data object GC may collect."""
    return len(name) == 64 and name.startswith(prefix2) and HEX64.fullmatch(name) is not None


def is_table_name(name: str) -> bool:
    """Whether ``name`` listed under ``_lakefs/`` is a range or metarange GC may collect."""
    return len(name) == 64 and HEX64.fullmatch(name) is not None
