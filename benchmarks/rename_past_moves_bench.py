"""What a directory rename costs once a branch holds the most uncommitted move records it may (issue 40).

    PYTHONPATH=. .venv/bin/python benchmarks/rename_past_moves_bench.py [--sizes 1000,100000]

For each size N, a repository ``rN`` gets a committed directory ``d/`` of N files (staged as raw
records and committed; every entry points at one stored object).  Then, through the mount's core
(``FileSystem`` driven by path, no kernel):

- **baseline**: the rename of ``d`` to ``e`` as one move record (the branch holds none yet);
- ``moves.MAX_MOVES - 1`` more renames of a small directory, so the branch holds the most it may;
- **past the limit**: the rename of ``e`` to ``f``, which stages a tombstone and an entry per key,
  reading the directory through the moves pending: seconds, and its ratio to the baseline;
- **lookups**: the median of 200 point reads of ``f/real.txt`` with the moves pending, and after
  the commit that ends them (the ratio is what a read pays for walking the layers);
- the commit of it all.

The machine's load average is printed with the figures (other work shares its cores).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from lakemount.app import App  # noqa: E402
from lakemount.config import load  # noqa: E402
from lakemount.graveler.moves import MAX_MOVES, move_of  # noqa: E402
from tests.fuse.conftest import make_fs  # noqa: E402
from tests.fuse.pathfs import PathFS  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from dir_rename_bench import build  # noqa: E402


def lookups(app: App, repo: str, ref: str, path: str) -> float:
    """Median seconds of a point read of ``path``."""
    laps = []
    for _ in range(200):
        t0 = time.perf_counter()
        assert app.catalog.get_optional(repo, ref, path) is not None, path
        laps.append(time.perf_counter() - t0)
    return statistics.median(laps)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1000,100000")
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="lm-past-moves-bench-")
    home = os.path.join(tmp, "home")
    os.makedirs(home, mode=0o700)
    os.environ["LAKEMOUNT_HOME"] = home
    os.environ["LAKEMOUNT_CACHE_DISK_BYTES"] = "0"
    app = App(load())
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}", flush=True)
    try:
        for n in (int(s) for s in args.sizes.split(",") if s):
            repo = f"r{n}"
            app.catalog.create_repository(repo)
            build(app, repo, "d", n)
            fs = make_fs(app, home, f"bench-{n}", head_ttl=1.0)
            pfs, root = PathFS(fs), f"/{repo}/main"
            try:
                t0 = time.perf_counter()
                pfs.rename(f"{root}/d", f"{root}/e")
                t_move = time.perf_counter() - t0
                pfs.mkdir(f"{root}/q0")
                pfs.write_file(f"{root}/q0/x", b"x")
                for i in range(MAX_MOVES - 1):
                    pfs.rename(f"{root}/q{i}", f"{root}/q{i + 1}")
                tokens = app.catalog.graveler.get_branch(repo, "main").tokens
                assert sum(1 for t in tokens if move_of(t)) == MAX_MOVES, "the branch does not hold the most moves"
                t0 = time.perf_counter()
                pfs.rename(f"{root}/e", f"{root}/f")
                t_past = time.perf_counter() - t0
                tokens = app.catalog.graveler.get_branch(repo, "main").tokens
                assert sum(1 for t in tokens if move_of(t)) == MAX_MOVES, "the rename past the limit made a move record"
                t_read = lookups(app, repo, "main", "f/real.txt")
                t0 = time.perf_counter()
                app.catalog.commit(repo, "main", "the renames")
                t_commit = time.perf_counter() - t0
                t_read_after = lookups(app, repo, "main", "f/real.txt")
            finally:
                fs.close()
            print(f"[{n:>9,}] rename as a move record (none pending): {t_move * 1000:.1f} ms; "
                  f"past {MAX_MOVES} pending, per key: {t_past:.3f} s = {t_past / t_move:.0f}x", flush=True)
            print(f"[{n:>9,}] a point read with {MAX_MOVES} moves pending: {t_read * 1e6:.0f} us; after the commit: "
                  f"{t_read_after * 1e6:.0f} us ({t_read / t_read_after:.1f}x); the commit: {t_commit:.2f} s", flush=True)
    finally:
        app.close()
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
