"""A sample dataset for a new repository (lakeFS's ``sample_data``), made here: nothing is downloaded or copied.

``createRepository`` with ``sample_data`` (the SDK's ``include_samples=True``) fills the new repository's
default branch with these files in one commit, as lakeFS's quickstart does: a README that says what
is there and what to try, a small Parquet table of lakes written with pyarrow, the same table as CSV,
a few tiny PNG images generated pixel by pixel, and an example hook under ``_lakefs_actions/`` that
checks Parquet schemas before a merge into ``main``.  The data is fixed, so every sample
repository starts from the same tree (the same commit content, whatever the date).
"""

from __future__ import annotations

import io
import struct
import zlib
from collections.abc import Callable, Iterator
from typing import Final

SAMPLE_MESSAGE: Final = "Add sample data"

# (name, country, area in km², maximum depth in m): a few of the world's large lakes.
LAKES: Final = (
    ("Caspian Sea", "Kazakhstan", 371000, 1025),
    ("Superior", "Canada", 82100, 406),
    ("Victoria", "Uganda", 68870, 84),
    ("Huron", "Canada", 59600, 229),
    ("Michigan", "United States", 58000, 281),
    ("Tanganyika", "Tanzania", 32600, 1470),
    ("Baikal", "Russia", 31500, 1642),
    ("Great Bear", "Canada", 31000, 446),
    ("Malawi", "Malawi", 29500, 706),
    ("Great Slave", "Canada", 27200, 614),
    ("Titicaca", "Peru", 8372, 281),
    ("Geneva", "Switzerland", 580, 310),
)

README: Final = """# Sample data

This repository was created with sample data: a small dataset to try versioning on.

- `lakes.parquet`: twelve of the world's large lakes (name, country, area_km2, max_depth_m)
- `lakes.csv`: the same table as CSV
- `images/`: three tiny generated PNG images
- `_lakefs_actions/check_tables.yaml`: an example hook; a merge into `main` is refused if it
  brings a Parquet file that drops a column of `lakes.parquet`, or an object over 100MB

Things to try: create a branch, change or delete a file there, look at the uncommitted
changes, commit, diff the branch against `main`, and merge it back.
"""

ACTION: Final = """# An example hook (lakeFS's action format): before a merge into main, a Parquet file
# the merge brings must keep every column of the Parquet files beside it (lakes.parquet's
# name, country, area_km2, max_depth_m), and no object may be over 100MB.
name: Check tables
on:
  pre-merge:
    branches: [main]
hooks:
  - id: tables_keep_their_columns
    type: lakemount_check
    properties:
      parquet_schema: compatible
      max_size: 100MB
"""


def _png(width: int, height: int, pixel: Callable[[int, int], tuple[int, int, int]]) -> bytes:
    """An 8-bit RGB PNG whose pixel (x, y) is ``pixel(x, y)`` -> (r, g, b)."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    rows = b"".join(
        b"\x00" + b"".join(bytes(pixel(x, y)) for x in range(width)) for y in range(height)
    )
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows, 9)) + chunk(b"IEND", b"")


def _images() -> Iterator[tuple[str, bytes]]:
    n = 32
    yield "images/gradient.png", _png(n, n, lambda x, y: (x * 8, y * 8, 128))
    yield "images/checkers.png", _png(n, n, lambda x, y: (240, 240, 240) if (x // 8 + y // 8) % 2 else (30, 60, 120))
    yield "images/lake.png", _png(n, n, lambda x, y: (20, 90, 200) if (x - 16) ** 2 + (y - 16) ** 2 < 144 else (60, 160, 70))


def _tables() -> Iterator[tuple[str, bytes]]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.table({
        "name": [r[0] for r in LAKES],
        "country": [r[1] for r in LAKES],
        "area_km2": pa.array([r[2] for r in LAKES], pa.int64()),
        "max_depth_m": pa.array([r[3] for r in LAKES], pa.int64()),
    })
    buf = io.BytesIO()
    pq.write_table(table, buf)
    yield "lakes.parquet", buf.getvalue()
    lines = ["name,country,area_km2,max_depth_m", *(f"{n},{c},{a},{d}" for n, c, a, d in LAKES)]
    yield "lakes.csv", ("\n".join(lines) + "\n").encode()


def sample_files() -> list[tuple[str, bytes, str]]:
    """The sample dataset: (path, content, content type) of every file, in path order."""
    types = {".md": "text/markdown", ".parquet": "application/vnd.apache.parquet", ".csv": "text/csv",
             ".png": "image/png", ".yaml": "application/yaml"}
    files = [
        ("README.md", README.encode()),
        ("_lakefs_actions/check_tables.yaml", ACTION.encode()),
        *_tables(),
        *_images(),
    ]
    return sorted((path, data, types[path[path.rfind("."):]]) for path, data in files)
