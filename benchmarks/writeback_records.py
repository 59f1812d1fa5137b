"""Write-back in the kernel-free core: journal records per small file, files/s and the handlers' time (stop 50).

    PYTHONPATH=A_TREE .venv/bin/python benchmarks/writeback_records.py --files 3000   # then B_TREE, alternating

Imports lakemount (and ``tests/fuse/pathfs.py``) from the tree on ``PYTHONPATH``, so two checkouts can be
compared run by run.  Writes ``--files`` 1 KiB files into one directory of a write-back core
(``FileSystem`` driven by ``PathFS``: create, write, close, release, as ``cp`` asks for them) and prints the
journal records appended per file (the pipeline's ``done`` records included), files/s, the process's CPU
per file and the handlers' own seconds per file from the core's op histograms.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import sys
import tempfile
import time


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--files", type=int, default=3000)
    n = parser.parse_args().files
    tree = os.environ.get("PYTHONPATH", os.path.dirname(os.path.dirname(os.path.abspath(__file__)))).split(os.pathsep)[0]
    sys.path.insert(0, tree)
    os.chdir(tree)
    root = tempfile.mkdtemp(prefix="wbrec-")
    home = os.path.join(root, "home")
    os.makedirs(home, mode=0o700)
    os.environ["LAKEMOUNT_HOME"] = home
    os.environ.pop("LAKEMOUNT_CONFIG", None)
    import lakemount
    from lakemount.app import App
    from lakemount.fuse.core import FileSystem, MountOptions
    from tests.fuse.pathfs import PathFS

    try:
        app = App.from_config()
        app.catalog.create_repository("bench")
        opts = MountOptions(spool_dir=os.path.join(home, "spool"), head_ttl=1.0, writeback=True, journal_dir=os.path.join(home, "j"))
        fs = FileSystem(app.catalog, app.catalog.block_source(), app.cache.ram, app.cache.disk, opts)
        assert fs.writeback is not None
        pfs = PathFS(fs)
        pfs.mkdir("/bench/main/src")
        pfs.write_file("/bench/main/src/first", b"x")  # drops the directory's marker: not one of the measured files
        seq0 = fs.writeback.journal.seq
        datas = [os.urandom(1024) for _ in range(n)]
        c0, t = time.process_time(), time.perf_counter()
        for i, data in enumerate(datas):
            pfs.write_file(f"/bench/main/src/f{i:05d}", data)
        took, cpu = time.perf_counter() - t, time.process_time() - c0
        records = fs.writeback.journal.seq - seq0
        text = fs.render_stats()
        ops = {m.group(1): float(m.group(2)) for m in re.finditer(r'lakemount_fuse_op_seconds_sum\{op="(\w+)"\} ([0-9.e-]+)', text)}
        handlers = sum(ops.get(k, 0.0) for k in ("create", "write", "flush", "release"))
        fs.close()
        app.close()
        print(f"{os.path.dirname(os.path.dirname(lakemount.__file__))}: {n / took:,.0f} files/s, process CPU {cpu / n * 1e3:.3f} ms/file, "
              f"handlers {handlers / n * 1e6:.0f} us/file (create {ops.get('create', 0) / n * 1e6:.0f}, flush {ops.get('flush', 0) / n * 1e6:.0f}), "
              f"journal records per file {records / n:.2f}, load {os.getloadavg()[0]:.1f}")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
