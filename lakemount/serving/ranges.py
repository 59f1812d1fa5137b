"""HTTP byte ranges and dates, as both front ends read and write them."""

from __future__ import annotations

import email.utils
import re
from typing import Final


class RangeNotSatisfiable(Exception):
    """A Range that lies outside an object of ``size`` bytes (HTTP 416)."""

    def __init__(self, size: int) -> None:
        super().__init__(f"range not satisfiable for {size} bytes")
        self.size = size


def http_seconds(ns: int) -> int:
    """A time in nanoseconds since the epoch as the whole second HTTP and S3 show: rounded up.

    HTTP dates and S3's LastModified have no fraction.  Rounding down would
    date an object before the moment it was written, so a file written and
    uploaded within one second would look newer than its upload, and ``aws s3
    sync`` would upload it again on every run; rounded up, the shown time is
    never earlier than the write, and every front end shows the same second.
    """
    return -(-ns // 1_000_000_000)


def http_date(ns: int) -> str:
    """An HTTP-date (RFC 7231, GMT) for a time in nanoseconds since the epoch (its :func:`http_seconds`)."""
    return email.utils.formatdate(http_seconds(ns), usegmt=True)


RANGE: Final = re.compile(r"^bytes=(\d*)-(\d*)$")


def parse_range(header: str | None, size: int) -> tuple[int, int] | None:
    """(start, length) of a Range header; None for no (or an ignorable) range.

    Raises :class:`RangeNotSatisfiable` (HTTP 416) when the range lies outside
    the object.  As S3 and lakeFS do, a malformed header or several ranges mean
    the whole object.
    """
    if header is None:
        return None
    m = RANGE.match(header.strip())
    if m is None:
        return None
    first, last = m.group(1), m.group(2)
    if not first and not last:
        return None
    if not first:
        n = int(last)
        if n == 0 or size == 0:
            raise RangeNotSatisfiable(size)
        n = min(n, size)
        return size - n, n
    start = int(first)
    if last and int(last) < start:
        return None
    if start >= size:
        raise RangeNotSatisfiable(size)
    end = min(int(last), size - 1) if last else size - 1
    return start, end - start + 1
