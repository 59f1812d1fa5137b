"""The layout of a storage namespace: the one module that knows where data objects and tables lie.

A repository's storage namespace holds its object data content-addressed,
``data/<aa>/<sha256>`` (``aa`` the digest's first two hex digits, so no
directory or S3 prefix grows past 1/256 of the objects), and its ranges and
metaranges as ``_lakefs/<64 hex>`` (graveler writes those itself, as
``committed/store.table_url``; graveler imports nothing outward).  The writer
(:mod:`lakemount.catalog.writer`) names what it stores with
:func:`data_address`; upload addresses handed out for linking
(``catalog/uploads.py``) take the same shape with a random name; garbage
collection and its trash (``jobs/gc_tasks.py``, ``block/trash.py``) recognise
what they may collect with the parsers below.  It lives in ``block`` because
the trash, a block-store wrapper, needs it and the block store is the lowest
layer that every other one may import.
"""

from __future__ import annotations

import re
from typing import Final

DATA_PREFIX: Final = "data/"
TABLES_PREFIX: Final = "_lakefs/"
# Both shapes have the same length: "data/" + 2 + "/" + 64 and "_lakefs/" + 64.
KEY_LEN: Final = 72
NAME_START: Final = 8  # where the 64-hex name starts in either shape

_HEX64: Final = re.compile(r"[0-9a-f]{64}")
_DATA_KEY: Final = re.compile(r"data/([0-9a-f]{2})/(\1[0-9a-f]{62})")
_TABLE_KEY: Final = re.compile(r"_lakefs/[0-9a-f]{64}")


def data_address(name: str) -> str:
    """The namespace-relative address of the data object named ``name`` (a SHA-256 hex digest, or a
    random 64-hex name handed out for a direct upload): ``data/<aa>/<name>``."""
    return f"{DATA_PREFIX}{name[:2]}/{name}"


def data_dir(prefix2: str) -> str:
    """The directory (``data/<aa>/``) of the data objects whose names start with ``prefix2``."""
    return f"{DATA_PREFIX}{prefix2}/"


def data_sha(key: str) -> str | None:
    """The name (SHA-256) of a ``data/<aa>/<sha256>`` key, None for any other key.

    Only the shape is checked (cheap, per record in GC's mark); candidates for
    deletion are validated strictly when listed (:func:`is_data_name`), so a
    malformed live key can only keep something, never delete it.
    """
    if len(key) == KEY_LEN and key.startswith(DATA_PREFIX) and key[7] == "/" and key[5:7] == key[8:10]:
        return key[NAME_START:]
    return None


def is_data_key(key: str) -> bool:
    """Whether ``key`` is exactly a data object's address: ``data/<aa>/<64 lower hex starting with aa>``."""
    return _DATA_KEY.fullmatch(key) is not None


def is_data_name(prefix2: str, name: str) -> bool:
    """Whether ``name`` listed under ``data/<prefix2>/`` is a data object GC may collect."""
    return len(name) == 64 and name.startswith(prefix2) and _HEX64.fullmatch(name) is not None


def table_key(name: str) -> str:
    """The namespace-relative key of the range or metarange ``name``."""
    return f"{TABLES_PREFIX}{name}"


def is_table_key(key: str) -> bool:
    """Whether ``key`` is exactly a range's or metarange's key: ``_lakefs/<64 lower hex>``."""
    return _TABLE_KEY.fullmatch(key) is not None


def is_table_name(name: str) -> bool:
    """Whether ``name`` listed under ``_lakefs/`` is a range or metarange GC may collect."""
    return len(name) == 64 and _HEX64.fullmatch(name) is not None


def collected_name(key: str) -> str:
    """The 64-hex name of a data or table key (the part GC's sets of live objects hold)."""
    return key[NAME_START:]


def is_data(key: str) -> bool:
    """Whether a key GC collected is a data object's (else it is a table's)."""
    return key.startswith(DATA_PREFIX)
