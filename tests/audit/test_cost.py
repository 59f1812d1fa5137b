"""The trail is cheap where it runs beside requests (issue 27): the request path only queues a tuple, and
the flusher encodes without Python work per record (the GIL it holds is the GIL request threads wait for).

Cost is shown as Python function calls counted with ``sys.setprofile``, not timed: a count does not depend on
what else the shared machine runs, and Python calls are what hold the GIL.  ``benchmarks/audit_bench.py``
measures the time.
"""

from __future__ import annotations

import gc
import hashlib
import io
import json
import os
import random
import subprocess
import sys
import textwrap
import time
from collections import Counter
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest

from lakemount.api.handler import ApiService
from lakemount.app import App
from lakemount.audit import table
from lakemount.audit.log import FLUSHER, REPO, WIDTH, AuditLog
from lakemount.audit.record import FIELDS, AuditRecord, Row, row
from lakemount.config import load
from lakemount.gateway.handler import S3Gateway
from lakemount.gateway.settings import from_config
from lakemount.serving.http import BytesBody, Request
from tests.calls import calls_made
from tests.gateway.server_fixture import signed_headers

from .conftest import Lake

STAT = "/api/v1/repositories/cost/refs/main/objects/stat"


def waiting(log: AuditLog) -> list[Row]:
    """The records queued in ``log`` and not yet taken by its flusher (the buffer holds their fields, flat)."""
    return list(zip(*(log._pending[i::WIDTH] for i in range(WIDTH))))  # type: ignore[arg-type]


def python_calls(fn: Callable[[], Any]) -> Counter[str]:
    """The Python functions ``fn`` calls (C functions are not counted), as ``file:function``."""
    return calls_made(fn, c_calls=False)


def _stat(lake: Lake, api: ApiService | None = None) -> Callable[[], None]:
    def run() -> None:
        resp = (api or lake.api).handle(Request("GET", STAT, "path=d/obj", (lake.auth,), client="192.0.2.7"))
        assert resp.status == 200

    return run


def inits_as_one(calls: Mapping[str, int]) -> dict[str, int]:
    """``calls`` with every compiled ``__init__`` counted under one name: a record's is ``<record NAME>:__init__``
    (``lakemount/records.py`` compiles it), a dataclass's ``<string>:__init__``."""
    out: dict[str, int] = {}
    for name, n in calls.items():
        key = "__init__" if name.startswith("<") and name.endswith(":__init__") else name
        out[key] = out.get(key, 0) + n
    return out


def test_the_request_path_only_queues_a_tuple(lake: Lake) -> None:
    """statObject with the trail on calls the edge's hook and the log's append, and no other Python function: nothing
    that builds, escapes or encodes a record, nor reads the query again; the same request with the trail off is the
    baseline."""
    lake.app.catalog.create_repository("cost")
    lake.app.catalog.put("cost", "main", "d/obj", b"x" * 10)
    lake.app.catalog.commit("cost", "main", "data")
    off = App(load(None, env={**lake.env, "LAKEMOUNT_AUDIT_ENABLED": "false"}))  # the same home, the trail off
    try:
        assert off.audit is None
        on_run, off_run = _stat(lake), _stat(lake, ApiService(off))
        on_run(), off_run()  # warm: caches, the flusher started, lazy imports
        extra = python_calls(on_run) - python_calls(off_run)
    finally:
        off.close()
    # the path comes noted by the operation, as the commit does: the hook read the query again for it (context.py:q);
    # the record and the actor (two inits) are entered in two plain calls, and only with the trail on
    assert inits_as_one(extra) == {"__init__": 2, "context.py:enter": 1, "context.py:leave": 1, "handler.py:_record": 1,
                     "log.py:record": 1}, extra
    assert lake.app.audit is not None
    queued = waiting(lake.app.audit)[-1]
    assert len(queued) == len(FIELDS)
    assert FIELDS[REPO] == "repo" and queued[REPO] == "cost"  # the flusher groups records by this column


GETS = 10


def _gets(gw: S3Gateway) -> Callable[[], None]:
    """``GETS`` warm 4 KiB GetObjects through ``gw`` (one signed request, sent again: the signature stays valid)."""
    headers = signed_headers("GET", "http://gw/cost/main/d/obj", {"content-length": "0"}, hashlib.sha256(b"").hexdigest())
    lowered = tuple((k.lower(), v) for k, v in headers.items())

    def run() -> None:
        for _ in range(GETS):
            resp = gw.handle(Request("GET", "/cost/main/d/obj", "", lowered, BytesBody(b""), client="192.0.2.7"))
            assert resp.status == 200 and resp.body == b"x" * 4096
            if resp.close is not None:
                resp.close()

    return run


def test_a_gateway_get_is_recorded_by_its_hook_and_the_append_alone(lake: Lake) -> None:
    """N warm GETs with the trail on make, beyond the same GETs with it off (same home), per GET: the request's record
    and actor built (two dataclass inits), the actor entered and left (two plain calls), the edge's hook and the log's
    append; no other Python call.  The hook split the key again (``buckets.py:split``), read the user through a
    property (``context.py:user``) and the length through a method (``http.py:content_length``) per GET, though the
    operation knew the path and the response its length; both sides entered the actor through a generator-based
    context manager (``context.py:acting``, six calls), the trail off too, for nothing.  The record still holds all
    the issue lists."""
    head = _committed_object(lake, 4096)
    off_app = App(load(None, env={**lake.env, "LAKEMOUNT_AUDIT_ENABLED": "false"}))  # the same home, the trail off
    try:
        assert off_app.audit is None
        on_run, off_run = _gets(lake.gw), _gets(S3Gateway(off_app, from_config(off_app.config)))
        on_run(), off_run()  # warm: kept reads, the flusher started, lazy imports
        on, off = fewest_calls(on_run), fewest_calls(off_run)
    finally:
        off_app.close()
    extra = on - off
    python = {name: n for name, n in extra.items() if not name.startswith("c:")}
    assert inits_as_one(python) == {"__init__": 2 * GETS, "context.py:enter": GETS, "context.py:leave": GETS,
                      "handler.py:_record": GETS, "log.py:record": GETS}, extra
    # C calls: the context variables, the frozen actor's fields, the operation's kind, the clock, the sequence, the
    # buffer's length and extend
    assert set(extra) - set(python) <= {"c:set", "c:reset", "c:__setattr__", "c:startswith", "c:time", "c:next",
                                        "c:len", "c:extend"}, extra
    assert not off - on, off - on
    assert on["context.py:acting"] == off["context.py:acting"] == 0
    assert lake.app.audit is not None
    queued = dict(zip(FIELDS, waiting(lake.app.audit)[-1], strict=True))
    assert {k: queued[k] for k in ("user", "frontend", "client", "repo", "ref", "commit", "path", "op", "bytes",
                                   "status")} == {
        "user": "admin", "frontend": "s3", "client": "192.0.2.7", "repo": "cost", "ref": "main", "commit": head,
        "path": "d/obj", "op": "GetObject", "bytes": 4096, "status": 200}
    assert isinstance(queued["time"], float) and queued["seq"] > waiting(lake.app.audit)[-2][FIELDS.index("seq")]


def _committed_object(lake: Lake, size: int) -> str:
    """Repository ``cost`` with ``d/obj`` (``size`` bytes) committed on ``main``: the commit's id."""
    cat = lake.app.catalog
    cat.create_repository("cost")
    cat.put("cost", "main", "d/obj", b"x" * size)
    cat.commit("cost", "main", "data")
    return cat.get_branch("cost", "main").commit_id


def test_the_request_records_what_it_resolved_when_it_ran(lake: Lake) -> None:
    """The flusher builds the record later from what the request queued: the commit is the one the request's ref
    resolved to (not resolved again at flush, after the branch moved), with the request's user, client, path,
    status and bytes."""
    cat = lake.app.catalog
    first = _committed_object(lake, 10)
    _stat(lake)()
    resp = lake.api.handle(Request("GET", "/api/v1/repositories/cost/refs/main/objects", "path=d/obj", (lake.auth,),
                                   client="192.0.2.7"))
    body = resp.body if isinstance(resp.body, bytes) else b"".join(resp.body)
    assert body == b"x" * 10
    cat.put("cost", "main", "d/obj", b"y")
    cat.commit("cost", "main", "moved")
    second = cat.get_branch("cost", "main").commit_id
    assert second != first
    missing = lake.api.handle(Request("GET", STAT, "path=d/none", (lake.auth,), client="192.0.2.8"))
    assert missing.status == 404
    recs = [(r.op, r.user, r.frontend, r.client, r.ref, r.commit, r.path, r.status, r.bytes)
            for r in lake.records("cost", op=None) if r.frontend == "api"]
    assert recs == [
        ("statObject", "admin", "api", "192.0.2.7", "main", first, "d/obj", 200, 0),
        ("getObject", "admin", "api", "192.0.2.7", "main", first, "d/obj", 200, 10),
        ("statObject", "admin", "api", "192.0.2.8", "main", second, "d/none", 404, 0),
    ]


def _rows(n: int, at: float) -> list[Row]:
    return [row(AuditRecord(at + i / 1000, i, "admin", "api", "127.0.0.1", "r", "main", "c" * 64, f"p/{i}",
                            "statObject", i, 200)) for i in range(n)]


def test_encoding_does_no_python_work_per_record() -> None:
    """Encoding 1000 records makes as many Python calls as encoding 10: columns are built by C code."""
    now = time.time()
    ten, thousand = _rows(10, now), _rows(1000, now)
    table.encode(ten)  # warm: pyarrow's lazy imports
    few = python_calls(lambda: table.encode(ten))
    many = python_calls(lambda: table.encode(thousand))
    assert many - few == Counter() and sum(few.values()) < 200, (many - few).most_common(5)


def _mount_rows(n: int, commit: str) -> list[Row]:
    """A mount's batch: one user, repository, ref, commit, process; a path per record."""
    now = time.time()
    return [row(AuditRecord(now + i / 1000, i, "alice", "mount", "", "r", "main", commit, f"p/{i}", "read", 4096, 200,
                            1000, "python3", 4321)) for i in range(n)]


def test_text_a_batch_repeats_is_copied_once_not_per_record(monkeypatch: pytest.MonkeyPatch) -> None:
    """The bytes the flusher copies into Arrow buffers for 1000 records of one commit grow by 63 when the commit id
    grows from 1 to 64 characters: the batch's distinct values are copied once, and an index per record (it was
    63,000: each record's copy, which the Parquet writer then hashed again to dictionary-encode it)."""
    import pyarrow

    copied: list[int] = []
    real = pyarrow.py_buffer

    def counted(obj: Any) -> Any:
        copied.append(memoryview(obj).nbytes)
        return real(obj)

    table.encode(_mount_rows(3, "c"))  # warm: pyarrow's lazy imports
    monkeypatch.setattr(pyarrow, "py_buffer", counted)
    sizes = []
    for commit in ("c", "c" * 64):
        copied.clear()
        data = table.encode(_mount_rows(1000, commit))
        sizes.append(sum(copied))
        assert {r.commit for r in table.decode(data)} == {commit}
    assert sizes[1] - sizes[0] == 63, sizes


def test_times_become_microseconds_without_a_python_step_per_record(monkeypatch: pytest.MonkeyPatch) -> None:
    """The time column is made by Arrow: no ``round`` per record (the old C loop called it 1000 times for 1000
    records), and each time is still ``round(t * 1_000_000)``, ties to even, as :func:`table.write` partitions by."""
    rounds = Counter[str]()

    def counting_round(x: float) -> int:
        rounds["round"] += 1
        return round(x)

    monkeypatch.setattr(table, "round", counting_round, raising=False)  # found before the builtin by table's code
    rows = _mount_rows(1000, "c")
    back = table.decode(table.encode(rows))
    assert rounds["round"] == 0
    assert [int(r.time * 1_000_000 + 0.5) for r in back] == [round(r[0] * 1_000_000) for r in rows]
    monkeypatch.undo()
    ties = [t for t in ((k + 0.5) / 1e6 + 1.7e9 for k in range(2000)) if t * 1e6 % 1 == 0.5]
    odd = [0, 1, 1.5e-6, 2.5e-6, 4e9 + 0.123456789, *(random.uniform(0, 4e9) for _ in range(2000))]
    assert len(ties) > 10
    assert table._micros([*ties, *odd]).to_pylist() == [round(t * 1_000_000) for t in [*ties, *odd]]


def test_the_file_holds_plain_text_columns_whatever_reads_it(tmp_path: Path) -> None:
    """Columns built as dictionaries are written as the same Parquet schema as before: strings, int64 and a UTC
    timestamp, read back as such by pyarrow (no dictionary type) and DuckDB; repeated, distinct, empty and missing
    values alike."""
    import duckdb
    import pyarrow.parquet as pq

    rows = _mount_rows(8, "c" * 64)
    missing: Any = list(rows[3])
    missing[FIELDS.index("user")] = None
    rows[3] = tuple(missing)
    data = table.encode(rows)
    read = pq.read_table(io.BytesIO(data))
    assert read.schema.equals(table._schema()), read.schema
    assert [r.user for r in table.decode(data)] == ["alice"] * 3 + [""] + ["alice"] * 4
    path = tmp_path / "x.parquet"
    path.write_bytes(data)
    con = duckdb.connect()
    types = {name: kind for name, kind, *_ in con.execute(f"DESCRIBE SELECT * FROM read_parquet('{path}')").fetchall()}
    assert types["commit"] == "VARCHAR" and types["time"] == "TIMESTAMP WITH TIME ZONE" and types["pid"] == "BIGINT"
    assert con.execute(f"SELECT count(*), min(path), any_value(commit) FROM read_parquet('{path}') "
                       "WHERE user = 'alice'").fetchone() == (7, "p/0", "c" * 64)
    con.close()


def test_encoded_rows_decode_to_the_same_records_hostile_text_included() -> None:
    """Non-ASCII, control characters, NUL, backslashes and the undecodable bytes of a non-UTF-8 key (stored as
    ``\\xNN``), large and negative numbers, the time to the microsecond."""
    hostile = AuditRecord(1_700_000_000.123456, 2**40, "usér\\x\x1b[31m", "mount", "", "r", "mäin", "",
                          "a/\udcff\udcfe\x00b\n", "open", 2**50, 599, 0, "pr\u202eoc", 2**31, "h", '{"k":"\u2603"}')
    plain = AuditRecord(1_700_000_000.5, 1, "u", "api", "::1", "r", "", "", "", "statObject", 0, 404)
    back = table.decode(table.encode([row(hostile), row(plain)]))
    assert back[1] == plain
    assert back[0] == AuditRecord(**{**{f: getattr(hostile, f) for f in FIELDS}, "path": "a/\\xff\\xfe\x00b\n"})
    assert table.decode(table.encode([])) == []


def test_a_missing_value_is_stored_empty_not_the_batch_dropped() -> None:
    """A caller that passes None where text or a number goes (its own types said otherwise) costs that field, not the
    other records of the batch (the JSON encoder stored such a value as null; the columns are built without nulls)."""
    good = AuditRecord(1_700_000_000.0, 1, "u", "api", "", "r", "main", "c", "p", "statObject", 1, 200)
    bad: Any = list(row(good))
    bad[FIELDS.index("commit")], bad[FIELDS.index("bytes")], bad[FIELDS.index("seq")] = None, None, 2
    back = table.decode(table.encode([row(good), tuple(bad)]))
    assert back[0] == good
    assert (back[1].seq, back[1].commit, back[1].bytes, back[1].path) == (2, "", 0, "p")


def test_a_batch_across_an_hour_is_one_file_per_hour(lake: Lake) -> None:
    lake.app.catalog.create_repository("hours")
    ns = lake.app.catalog.repository("hours").storage_namespace
    edge = (time.time() // 3600 - 5) * 3600  # an hour boundary five hours ago
    rows = _rows(3, edge - 0.0015)  # at edge - 1.5 ms, - 0.5 ms, + 0.5 ms
    urls = table.write(lake.app.adapter, ns, "x.parquet", rows)
    assert [u.rsplit("/", 3)[1:3] for u in urls] == [
        table.partition(edge - 1).strip("/").split("/"), table.partition(edge).strip("/").split("/")]
    assert [len(table.decode(lake.app.adapter.get(u))) for u in urls] == [2, 1]


def test_one_flush_of_two_repositories_writes_each_its_own_records(lake: Lake) -> None:
    cat = lake.app.catalog
    for name in ("twoa", "twob"):
        cat.create_repository(name)
    log = lake.app.audit
    assert log is not None
    for i in range(6):
        log.record(repo=("twoa", "twob")[i % 2], op="statObject", path=f"p{i}", user="u", frontend="api", client="")
    assert log.flush() == 6
    assert [r.path for r in lake.records("twoa")] == ["p0", "p2", "p4"]
    assert [r.path for r in lake.records("twob")] == ["p1", "p3", "p5"]


def test_a_server_loads_the_parquet_writer_at_start_not_at_its_first_flush(tmp_path: Path) -> None:
    """Importing pyarrow's Parquet writer and its compute functions (the time column) holds the GIL for half a second:
    a long-running process pays it as it starts, before any request, not at its first flush in the middle of the
    requests that filled the buffer.  The child names the thread that imported each module (the import system asks
    the finders once per module) and counts the flushes: by the time ``start()`` returns, its caller imported both
    and no flush ran, so nothing is waited for."""
    home = tmp_path / "home"
    home.mkdir()
    script = textwrap.dedent("""
        import importlib.abc, json, sys, threading
        from lakemount.app import App
        from lakemount.config import load

        importers = {}

        class Importers(importlib.abc.MetaPathFinder):
            def find_spec(self, name, path=None, target=None):
                if name in ("pyarrow.parquet", "pyarrow.compute"):
                    importers.setdefault(name, threading.current_thread().name)
                return None  # the other finders import it

        sys.meta_path.insert(0, Importers())
        app = App(load(None))
        assert "pyarrow.parquet" not in sys.modules and "pyarrow.compute" not in sys.modules
        flushes = []
        flush = app.audit.flush
        app.audit.flush = lambda **kw: flushes.append(threading.current_thread().name) or flush(**kw)
        app.audit.start()
        loaded = "pyarrow.parquet" in sys.modules and "pyarrow.compute" in sys.modules
        print(json.dumps({"loaded": loaded, "importers": importers, "flushes": flushes,
                          "written": app.audit.counters["written"]}, sort_keys=True), flush=True)
        app.close()
    """)
    env = {k: v for k, v in os.environ.items() if not k.startswith("LAKEMOUNT_")}
    env.update(LAKEMOUNT_HOME=str(home), LAKEMOUNT_AUDIT_FLUSH_S="3600", PYTHONPATH=str(Path(__file__).parents[2]))
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    # loaded, by the caller of start() (not the flusher thread), and not by a flush (none ran: none was called)
    assert json.loads(out.stdout) == {"loaded": True, "flushes": [], "written": 0,
                                      "importers": {"pyarrow.compute": "MainThread", "pyarrow.parquet": "MainThread"}}


def test_a_server_worker_freezes_its_heap_with_the_parquet_writer_in_it(tmp_path: Path) -> None:
    """A gateway worker builds its app (the trail starts), then freezes its heap (``settle_worker_heap``): the Parquet
    writer is loaded by then, so its objects are frozen too.  Loaded by the flusher thread, pyarrow's imports went on
    after the freeze: ~11,000 objects the cyclic GC kept tracking, and counting towards its next collection, in every
    worker with the trail on and none with it off."""
    home = tmp_path / "home"
    home.mkdir()
    script = textwrap.dedent("""
        import gc, sys, threading, time
        from lakemount.audit.log import FLUSHER
        from lakemount.config import load
        from lakemount.gateway.server import build_asgi
        from lakemount.gateway.settings import from_config
        from lakemount.serving.workers import settle_worker_heap
        config = load(None)
        asgi = build_asgi(config, from_config(config))  # as a worker does (gateway/server.py:_worker)
        settle_worker_heap()
        flusher = next(t for t in threading.enumerate() if t.name == FLUSHER)

        def idle():  # the flusher waits out its interval: what it does first (its name, its imports) has ended
            f = sys._current_frames().get(flusher.ident)
            while f is not None:
                if f.f_code.co_name == "wait" and f.f_code.co_filename == threading.__file__ and f.f_back.f_code.co_name == "_run":
                    return True
                f = f.f_back
            return False

        deadline = time.monotonic() + 60
        while not idle():
            assert time.monotonic() < deadline, "the flusher thread never came to wait for its interval"
            time.sleep(0.01)
        print(len(gc.get_objects()), flush=True)
    """)
    env = {k: v for k, v in os.environ.items() if not k.startswith("LAKEMOUNT_")}
    env.update(LAKEMOUNT_HOME=str(home), LAKEMOUNT_AUDIT_FLUSH_S="3600", PYTHONPATH=str(Path(__file__).parents[2]))
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert int(out.stdout) < 500, out.stdout  # tracked and not frozen: what the waiting loop made (was ~11,000; 0 here now, as with the trail off)


def fewest_calls(fn: Callable[[], Any], times: int = 5) -> Counter[str]:
    """The calls of ``fn`` (:func:`calls_made`) that each of ``times`` runs made, at their fewest: without what runs now
    and then (a ref's periodic re-check)."""
    fewest = calls_made(fn)
    for _ in range(times - 1):
        fewest &= calls_made(fn)
    return fewest


def test_a_mount_handle_is_recorded_by_queueing_a_tuple(tmp_path: Path) -> None:
    """An open, a read and the release of a handle with the trail on make, beyond the same with it off (on the same
    mount), the mount's record call (names from its per-uid and per-pid caches) and the log's append: no dataclass
    built for the caller, no system call (``os.getpid()`` per record was one), nothing else."""
    from lakemount.fuse.runner import build_filesystem, mount_options
    from lakemount.fuse.values import Caller
    from tests.fuse.pathfs import PathFS

    app = App(load(None, env={"LAKEMOUNT_HOME": str(tmp_path / "home"), "LAKEMOUNT_AUDIT_FLUSH_S": "3600"}))
    app.catalog.create_repository("hand")
    app.catalog.put("hand", "main", "f.bin", b"x" * 4096)
    app.catalog.commit("hand", "main", "data", committer="t")
    fs = build_filesystem(app, mount_options(app, ref=None, head_ttl=3600.0))
    try:
        me = Caller(os.getuid(), os.getgid(), os.getpid())
        ino = PathFS(fs, me).ino("hand/main/f.bin")
        audit = fs.handles.audit
        assert audit is not None

        def run() -> None:
            fh = fs.open(ino, os.O_RDONLY, me).fh
            assert fs.read(fh, 0, 4096) == b"x" * 4096
            fs.release(fh)

        run()  # warm: the node's object, the caches of names, the flusher started
        on = fewest_calls(run)
        fs.handles.audit = None  # the trail off, all else equal
        off = fewest_calls(run)
        fs.handles.audit = audit
        assert app.audit is not None
        queued = waiting(app.audit)[-1]
    finally:
        fs.close()
        app.close()
    extra = on - off
    python = {name: n for name, n in extra.items() if not name.startswith("c:")}
    # the process's name is looked up at open, while it lives (a short one is gone by release), and read back then
    assert python == {"auditing.py:record": 1, "auditing.py:user": 1, "auditing.py:process": 2, "log.py:record": 1}, extra
    # C calls: the clock, the sequence, the caches' lookups, the buffer's length and extend (its fields, no tuple kept)
    assert set(extra) - set(python) <= {"c:time", "c:next", "c:get", "c:len", "c:extend"}, extra
    assert len(queued) == len(FIELDS)
    assert (queued[REPO], queued[FIELDS.index("op")], queued[FIELDS.index("bytes")]) == ("hand", "read", 4096)


def test_a_flush_takes_and_encodes_its_records_without_work_per_record_in_python(lake: Lake) -> None:
    """The flusher holds the GIL the mount's request loop needs: taking 1000 records from the buffer, grouping and
    encoding them makes the same calls from Python code as for 10 (popping each, rounding each time were one per
    record)."""
    lake.app.catalog.create_repository("flushes")
    log = lake.app.audit
    assert log is not None

    def queue(n: int) -> None:
        for i in range(n):
            log.record(repo="flushes", op="read", path=f"p/{i}", nbytes=i, user="u", frontend="mount", client="")

    queue(3)
    log.flush()  # warm: lazy imports, the retention pass (hourly), the folders
    counts = []
    for n in (10, 1000):
        queue(n)
        counts.append(calls_made(log.flush))
    assert counts[1] == counts[0], (counts[1] - counts[0]) + (counts[0] - counts[1])
    assert log.counters["written"] == 1013


def test_the_flushing_thread_has_its_name_in_the_kernel_too(lake: Lake) -> None:
    """``/proc/<pid>/task/<tid>/comm`` names the flusher, so ``top -H`` and ``benchmarks/audit_bench.py`` tell its CPU
    from the request loop's (Python 3.11 names only its own thread object; the kernel saw ``python``)."""
    log = lake.app.audit
    assert log is not None
    log.record(repo="named", op="read", path="p", user="u", frontend="mount", client="")  # starts the flusher
    thread = log._thread
    assert thread is not None and thread.native_id is not None
    comm = f"/proc/{os.getpid()}/task/{thread.native_id}/comm"
    deadline = time.monotonic() + 30
    while True:  # the thread names itself as it starts
        with open(comm) as f:
            name = f.read().rstrip("\n")
        if name == FLUSHER or time.monotonic() > deadline:
            break
        time.sleep(0.01)
    assert name == FLUSHER == thread.name


def _waiting_in(thread: Any, function: str) -> bool:
    """Whether ``thread`` is blocked in a ``wait`` (an ``Event``'s, a ``Condition``'s) called from ``function``."""
    frame = sys._current_frames().get(thread.ident)
    names = []
    while frame is not None:
        names.append(frame.f_code.co_name)
        frame = frame.f_back
    return bool(names) and names[0] == "wait" and function in names


def test_queued_records_leave_nothing_for_the_cyclic_gc(lake: Lake) -> None:
    """1000 queued records add no object the cyclic GC tracks (a tuple kept per record added 1000: a mount busy with
    the trail on ran collections, now and then a full one of its whole heap, that the same mount with the trail off
    never ran; in-process that was ~3.6 us of GC per open), and the flusher writes them all."""
    log = lake.app.audit
    assert log is not None
    lake.app.catalog.create_repository("gcfree")
    log.record(repo="gcfree", op="read", path="warm", user="u", frontend="mount", client="")  # the flusher started
    # Count once the flusher waits for its interval: a thread still starting (naming itself, loading the writer)
    # allocates while the loop below runs, and on a loaded machine that was counted (33 objects, one run in a
    # fast-tier run at load 15).
    flusher = log._thread
    assert flusher is not None
    deadline = time.monotonic() + 60
    while not _waiting_in(flusher, "_run"):
        assert time.monotonic() < deadline, "the audit flusher never settled into waiting for its interval"
        time.sleep(0.01)
    # The count is the whole process's: another thread of the fixture's app that allocates during a round is
    # counted with it (88 objects, one CI run). A tuple kept per record adds 1000 in every round, so the least of
    # a few rounds is the record's own cost; the buffer holding only untracked fields is checked directly too.
    paths = ["warm"]
    added: list[int] = []
    for attempt in range(5):
        gc.collect()
        gc.disable()
        try:
            before = len(gc.get_objects())
            for i in range(1000):
                log.record(repo="gcfree", op="read", path=f"p/{attempt}/{i}", nbytes=i, user="u", frontend="mount",
                           client="")
            added.append(len(gc.get_objects()) - before)
        finally:
            gc.enable()
        paths += [f"p/{attempt}/{i}" for i in range(1000)]
        if added[-1] < 20:
            break
    assert min(added) < 20, added
    assert not [field for field in log._pending if gc.is_tracked(field)]
    assert [r[FIELDS.index("path")] for r in waiting(log)] == paths
    assert log.flush() == len(paths)
    assert [r.bytes for r in lake.records("gcfree")][-3:] == [997, 998, 999]


def test_records_are_counted_once_waiting_and_written(lake: Lake) -> None:
    """The flusher counts as recorded what it takes from the buffer; until then the counters add what waits: a record
    is counted once, before and after its flush, live and as published for /metrics."""
    from lakemount.audit.log import collect

    lake.app.catalog.create_repository("counted")
    log = lake.app.audit
    assert log is not None
    for i in range(5):
        log.record(repo="counted", op="read", path=f"p{i}", user="u", frontend="mount", client="")
    assert (log.stats()["audit_recorded"], log.stats()["audit_written"]) == (5, 0)
    assert log.flush() == 5
    assert (log.stats()["audit_recorded"], log.stats()["audit_written"]) == (5, 5)
    log.record(repo="counted", op="read", path="p5", user="u", frontend="mount", client="")
    assert log.stats()["audit_recorded"] == 6
    log.flush()
    assert {k: collect(lake.app.config.home)[k] for k in ("recorded", "written")} == {"recorded": 6, "written": 6}


def test_a_forked_child_queues_into_its_own_buffer(lake: Lake) -> None:
    """The request path no longer asks the system for its pid: a fork's child still sees it is not its parent (the
    fork hook) and starts its own buffer, counters and flusher at its first record rather than adding to the copy of
    its parent's."""
    log = lake.app.audit
    assert log is not None
    log.record(repo="forks", op="read", path="parent", user="u", frontend="mount", client="")
    assert len(waiting(log)) == 1
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report what its first record did, then leave without running the parent's exit hooks
        code = 1
        try:
            log.record(repo="forks", op="read", path="child", user="u", frontend="mount", client="")
            paths = [r[FIELDS.index("path")] for r in waiting(log)]
            os.write(write, repr((paths, log.stats()["audit_recorded"], log._pid == os.getpid())).encode())
            code = 0
        finally:
            os._exit(code)
    os.close(write)
    with os.fdopen(read) as f:
        got = f.read()
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert got == repr((["child"], 1, True))
    assert [r[FIELDS.index("path")] for r in waiting(log)] == ["parent"]  # the parent's buffer is its own still
