"""What GC makes of the addresses in records: namespace-relative keys, or data outside the namespace.

The layout GC relies on (``data/<aa>/<sha256>`` for data objects,
``_lakefs/<64 hex>`` for tables, anything else left alone) is
:mod:`lakemount.block.layout`'s.  Tables themselves are read straight from
the block store with :mod:`lakemount.catalog.storage` (``read_table``,
``metarange_ranges``, ``value_address``).
"""

from __future__ import annotations


def namespace_key(address: str, namespace: str) -> str | None:
    """``address`` relative to ``namespace``; None for an absolute URL elsewhere (imported data)."""
    if "://" not in address:
        return address
    root = namespace.rstrip("/") + "/"
    if address.startswith(root):
        return address[len(root) :]
    return None
