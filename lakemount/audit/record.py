"""One audit record: who did what to which path of which repository, through which front end, with what result.

Records are frozen; the log (``log.py``) stamps the time and a logical sequence
when they are made.  ``status`` is HTTP-like for every front end (200 done, 403
refused, 404 missing, 5xx failed) so one filter works across all of them; the
mount and the CLI translate their outcomes into the same codes.
"""

from __future__ import annotations

from typing import Final, cast

from lakemount.records import record

# Front ends, as stored in the ``frontend`` column.
GATEWAY: Final = "s3"
API: Final = "api"
MOUNT: Final = "mount"
CLI: Final = "cli"
JOBS: Final = "jobs"
ICEBERG: Final = "iceberg"  # the Iceberg REST catalog (lakemount/iceberg/)


@record(frozen=True, slots=True)
class AuditRecord:
    """One data access or change.

    ``time`` is seconds since the epoch (UTC); ``seq`` increases within the
    process that wrote the record (``host`` and ``pid`` name it), so
    ``(host, pid, seq)`` orders one process's records and identifies each one.
    ``ref`` is the ref as asked (a branch, tag or commit expression) and
    ``commit`` what it resolved to ("" when nothing was resolved).  ``path`` is
    an object's path, or the prefix of a listing.  ``uid``, ``process`` and
    ``pid`` are the local caller of a mount operation (-1, "" and -1 elsewhere);
    ``detail`` is a small JSON text for what a versioning verb or job adds.
    """

    time: float
    seq: int
    user: str
    frontend: str
    client: str
    repo: str
    ref: str
    commit: str
    path: str
    op: str
    bytes: int
    status: int
    uid: int = -1
    process: str = ""
    pid: int = -1
    host: str = ""
    detail: str = ""


FIELDS: Final = tuple(AuditRecord.__dataclass_fields__)

# A record as the request path queues it: its fields as a plain tuple, in ``FIELDS`` order.  Making one is
# a single C-level step (a frozen dataclass runs Python code per field); the flusher writes rows as they are.
Row = tuple[float, int, str, str, str, str, str, str, str, str, int, int, int, str, int, str, str]


def row(r: AuditRecord) -> Row:
    """``r`` as a :data:`Row`."""
    return cast(Row, tuple(getattr(r, name) for name in FIELDS))


def cursor(r: AuditRecord) -> str:
    """A record's place in the table's order, as text that sorts the same way (a listing's ``after``)."""
    return f"{int(r.time * 1_000_000):020d}.{r.host}.{max(r.pid, 0):010d}.{r.seq:012d}"


def as_json(r: AuditRecord) -> dict[str, object]:
    """A record as JSON data: the fields, the time as UTC ISO 8601 too, and its :func:`cursor`."""
    from datetime import UTC, datetime

    out: dict[str, object] = {name: getattr(r, name) for name in FIELDS}
    out["time"] = datetime.fromtimestamp(r.time, UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")
    out["timestamp"] = r.time
    out["id"] = cursor(r)
    return out


def shown(text: str) -> str:
    """``text`` safe for a terminal or a table cell: control and other unprintable characters (and ``\\``)
    escaped as ``\\xNN``/``\\uNNNN``, undecodable bytes as ``\\xNN``; stored records keep the text as it was."""
    if text.isprintable() and "\\" not in text:
        return text
    out = []
    for c in text:
        n = ord(c)
        if c == "\\":
            out.append("\\\\")
        elif c.isprintable():
            out.append(c)
        elif 0xDC80 <= n <= 0xDCFF:  # a surrogate-escaped byte of a key that is not UTF-8
            out.append(f"\\x{n - 0xDC00:02x}")
        elif n < 0x100:
            out.append(f"\\x{n:02x}")
        else:
            out.append(f"\\u{n:04x}" if n < 0x10000 else f"\\U{n:08x}")
    return "".join(out)
