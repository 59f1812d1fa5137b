"""The S3 adapter's batches of small puts go through a child process (lakemount/block/putprocess.py)."""

from __future__ import annotations

import gc
import os
import signal
import subprocess
import sys
import textwrap
import time
from typing import Any

import pytest

from lakemount.block.putprocess import NICE, PutProcess
from lakemount.block.s3 import S3Adapter
from lakemount.errors import ObjectNotFound, Unavailable
from tests.block.conftest import BUCKET


def _items(prefix: str, n: int) -> list[tuple[str, bytes]]:
    return [(f"s3://{BUCKET}/{prefix}/{i:03d}", b"%d " % i + os.urandom(1000)) for i in range(n)]


def _gone(pid: int, within: float) -> bool:
    """True once process ``pid`` has exited (and been reaped by someone) within ``within`` seconds."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{pid}/stat") as f:
                if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                    return True
        except FileNotFoundError:
            return True
        time.sleep(0.02)
    return False


def test_a_batch_is_stored_whole_by_a_child_process_not_by_this_ones_client(
    s3_options: dict[str, Any], monkeypatch: pytest.MonkeyPatch,
) -> None:
    adapter = S3Adapter(**s3_options)
    try:
        # This process's client may not PUT: every object must come from the child's own client.
        monkeypatch.setattr(adapter._client, "put_object", lambda **kw: pytest.fail(f"a PUT in the caller's process: {kw}"))
        items = _items("child", 20)
        adapter.put_many(items)
        for url, data in items:
            assert adapter.get(url) == data
        puts = adapter._puts
        assert puts is not None and puts.started == 1
        pid = puts.pid
        assert pid is not None and pid != os.getpid()
        assert os.getpriority(os.PRIO_PROCESS, pid) == min(19, os.getpriority(os.PRIO_PROCESS, 0) + NICE)  # behind the loop
        adapter.put_many(_items("child-again", 3))
        assert puts.pid == pid and puts.started == 1  # one child serves batch after batch
    finally:
        if adapter._puts is not None:
            adapter._puts.close()


def test_the_childs_failure_comes_back_as_the_same_error(s3_options: dict[str, Any]) -> None:
    puts = PutProcess(S3Adapter, s3_options)
    try:
        with pytest.raises(ObjectNotFound, match="no such bucket"):
            puts.put_many([("s3://no-such-bucket-here/k", b"x")])
        assert puts.started == 1 and puts.pid is not None  # a refused batch is an answer, not a death
    finally:
        puts.close()


def test_a_child_killed_between_batches_is_replaced_and_nothing_is_lost(s3_options: dict[str, Any]) -> None:
    adapter = S3Adapter(**s3_options)
    try:
        adapter.put_many(_items("before", 2))
        puts = adapter._puts
        assert puts is not None
        first = puts.pid
        assert first is not None
        os.kill(first, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while puts.pid is not None:  # until the parent sees it dead (its threads may outlive its main one briefly)
            assert time.monotonic() < deadline, "the child outlived its kill"
            time.sleep(0.01)
        items = _items("after", 5)
        adapter.put_many(items)
        assert puts.started == 2 and puts.pid not in (None, first)
        for url, data in items:
            assert adapter.get(url) == data
    finally:
        if adapter._puts is not None:
            adapter._puts.close()


def test_a_child_that_dies_with_a_batch_fails_it_as_unavailable_and_the_next_batch_gets_a_new_one(
    s3_options: dict[str, Any],
) -> None:
    puts = PutProcess(S3Adapter, {**s3_options, "presign_expiry": 0})  # the child's adapter refuses it (InvalidArgument): it dies
    with pytest.raises(Unavailable, match="the upload process died"):
        puts.put_many(_items("dead", 2))
    assert puts.started == 1 and puts.pid is None
    puts._options = dict(s3_options)
    try:
        items = _items("revived", 3)
        puts.put_many(items)
        assert puts.started == 2
        reader = S3Adapter(**s3_options)
        for url, data in items:
            assert reader.get(url) == data
    finally:
        puts.close()


def test_the_child_ends_when_its_parent_is_killed(s3_options: dict[str, Any], tmp_path: Any) -> None:
    parent = textwrap.dedent(f"""
        import os, signal, sys
        sys.path.insert(0, {os.getcwd()!r})
        from lakemount.block.s3 import S3Adapter
        adapter = S3Adapter(**{s3_options!r})
        adapter.put_many([("s3://{BUCKET}/orphan/0", b"x"), ("s3://{BUCKET}/orphan/1", b"y")])
        print(adapter._puts.pid, flush=True)
        os.kill(os.getpid(), signal.SIGKILL)
    """)
    proc = subprocess.run([sys.executable, "-c", parent], capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    child = int(proc.stdout.split()[0])
    assert _gone(child, 10), "the upload process outlived its killed parent"


def test_an_adapter_dropped_without_close_ends_its_child(s3_options: dict[str, Any]) -> None:
    adapter = S3Adapter(**s3_options)
    adapter.put_many(_items("dropped", 2))
    assert adapter._puts is not None
    child = adapter._puts.pid
    assert child is not None
    del adapter
    gc.collect()
    assert _gone(child, 10), "the upload process of a dropped adapter kept running"


def test_a_forked_process_starts_a_child_of_its_own(s3_options: dict[str, Any]) -> None:
    adapter = S3Adapter(**s3_options)
    try:
        adapter.put_many(_items("before-fork", 2))
        assert adapter._puts is not None
        parent_child = adapter._puts.pid
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:  # the forked process: the parent's child is not its own
            try:
                os.close(r)
                puts = adapter._puts
                ok = puts is not None and puts.pid is None
                adapter.put_many(_items("after-fork", 2))
                ok = ok and puts is not None and puts.pid not in (None, parent_child)
                os.write(w, b"1" if ok else b"0")
            finally:
                os._exit(0)
        os.close(w)
        got = os.read(r, 1)
        os.close(r)
        os.waitpid(pid, 0)
        assert got == b"1", "a forked process used its parent's upload process"
        assert adapter._puts.pid == parent_child
    finally:
        if adapter._puts is not None:
            adapter._puts.close()
