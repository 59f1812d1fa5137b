"""``KeptRecords``: one read per kept record at a time, however many threads find it expired."""

from __future__ import annotations

import threading
import time
from typing import Any

from lakemount.catalog.kept import KeptRecords

THREADS = 16


def _until(what: Any, message: str, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not what():
        assert time.monotonic() < deadline, message
        time.sleep(0.005)


def _crowd(kept: KeptRecords, read: Any) -> tuple[list[threading.Thread], dict[int, Any]]:
    """``THREADS`` threads asking ``kept`` for the rules of ``r`` at once; what each got (or raised), by thread."""
    got: dict[int, Any] = {}

    def ask(i: int) -> None:
        try:
            got[i] = kept.rules("r", read)
        except Exception as exc:  # looked at by the test
            got[i] = exc

    threads = [threading.Thread(target=ask, args=(i,)) for i in range(THREADS)]
    for t in threads:
        t.start()
    return threads, got


def _waiting(kept: KeptRecords) -> int:
    """Threads waiting for the rules read in flight (its Event's waiters)."""
    flight = kept._reading.get(("rules", "r", ""))
    return 0 if flight is None else len(flight._cond._waiters)  # type: ignore[attr-defined]


def test_threads_finding_the_rules_expired_share_one_read() -> None:
    """Sixteen threads asking while the rules are read once: one read, every thread its answer."""
    kept = KeptRecords(None, max_age=60.0)
    release = threading.Event()
    reads: list[int] = []

    def read(repo: str) -> list[str]:
        reads.append(1)
        assert release.wait(10), "the read was never released"
        return ["main"]

    threads, got = _crowd(kept, read)
    _until(lambda: len(reads) == 1 and _waiting(kept) == THREADS - 1, "the threads never queued behind one read")
    release.set()
    for t in threads:
        t.join(10)
    assert got == {i: ["main"] for i in range(THREADS)}
    assert reads == [1] and kept.reads == 1


def test_a_failed_shared_read_makes_each_waiter_read_for_itself() -> None:
    """The read the others waited for failed: nothing was kept, so each of them reads (and gets its answer)."""
    kept = KeptRecords(None, max_age=60.0)
    release = threading.Event()
    reads: list[int] = []
    lock = threading.Lock()

    def read(repo: str) -> list[str]:
        with lock:
            reads.append(1)
            first = len(reads) == 1
        if first:
            assert release.wait(10), "the read was never released"
            raise OSError("the ref store went away")
        return ["main"]

    threads, got = _crowd(kept, read)
    _until(lambda: len(reads) == 1 and _waiting(kept) == THREADS - 1, "the threads never queued behind one read")
    release.set()
    for t in threads:
        t.join(10)
    assert sum(isinstance(v, OSError) for v in got.values()) == 1
    assert sum(v == ["main"] for v in got.values()) == THREADS - 1
    assert 2 <= len(reads) <= THREADS  # the first waiter to read keeps its answer for those after it


def test_a_write_taking_kept_rules_keeps_the_host_listening() -> None:
    """Stop 56: a host listens while something on it uses what notices keep true (``Listener.use``); a write
    taking the kept rules is such a use, and while the listener is not connected (a host that stopped listening
    while idle) the rules are read again past ``max_age``, as before."""

    class Listener:
        def __init__(self) -> None:
            self.connected = threading.Event()
            self.connected.set()
            self.uses = 0

        def use(self) -> bool:
            self.uses += 1
            return self.connected.is_set()

    listener = Listener()
    kept = KeptRecords(None, max_age=0.05)
    kept.follow(listener)
    reads: list[str] = []

    def read(repo: str) -> list[str]:
        reads.append(repo)
        return ["main"]

    assert kept.rules("r", read) == ["main"]
    time.sleep(0.1)
    listener.uses = 0
    assert kept.rules("r", read) == ["main"]  # past max_age, kept: notices arrive
    assert listener.uses >= 1 and reads == ["r"]
    listener.connected.clear()
    assert kept.rules("r", read) == ["main"]
    assert reads == ["r", "r"]
