"""Validation of byte ranges shared by every block adapter.

All adapters must agree on the edge cases of ``get_range`` (zero length, start
at or past the end, negative numbers) so that callers never depend on a backend.
"""

from __future__ import annotations

from lakemount.errors import InvalidArgument


def check_range(start: int, length: int) -> None:
    """Raise ``InvalidArgument`` unless ``start`` and ``length`` are non-negative."""
    if start < 0 or length < 0:
        raise InvalidArgument(f"invalid byte range: start={start} length={length}")
