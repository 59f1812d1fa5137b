"""``notify.Pacer``: a process's staging notices of a branch, at most one per pace (no database needed)."""

from __future__ import annotations

import threading
import time
from typing import Any

from lakemount.catalog.kept import changed_dirs
from lakemount.metastore import notify


def _pacer(pace: float) -> tuple[notify.Pacer, list[tuple[str, str, str, notify.Notice]], threading.Event]:
    sent: list[tuple[str, str, str, notify.Notice]] = []
    went = threading.Event()

    def send(repo: str, branch: str, detail: str, notice: notify.Notice) -> None:
        sent.append((repo, branch, detail, notice))
        went.set()

    return notify.Pacer(send, pace=pace), sent, went


def test_the_stagings_within_the_pace_owe_one_notice_naming_all_they_changed() -> None:
    """A burst: the first staging's notice is plain (no lease), the second's paced (the lease), the rest are held."""
    pacer, sent, went = _pacer(0.3)
    first = pacer.inline("r", "main")
    second = pacer.inline("r", "main")
    t = time.monotonic()
    assert first is not None and not first.paced and second is not None and second.paced
    assert second.seq > first.seq
    assert pacer.inline("r", "main") is None and pacer.inline("r", "main") is None
    dev = pacer.inline("r", "dev")  # branches are paced apart
    assert dev is not None and not dev.paced
    pacer.owe("r", "main", notify.dirs_detail([b"a/f"]))
    pacer.owe("r", "main", notify.dirs_detail([b"b/c/f"]))
    assert went.wait(10)
    assert time.monotonic() - t >= 0.25  # not before the pace allowed
    assert [(r, b, changed_dirs(d)) for r, b, d, _ in sent] == [("r", "main", ["a", "b/c"])]
    assert sent[0][3].paced and sent[0][3].seq > dev.seq
    assert (pacer.inline_sent, pacer.plain_sent, pacer.held, pacer.owed_sent) == (3, 2, 2, 1)


def test_sparse_stagings_send_plain_notices_and_take_no_lease() -> None:
    """Stop 53: a staging more than the pace after the branch's last notice, holding and owing nothing, sends a
    plain notice: no listener re-delivers the branch whole after it (stop 52's write-back batches did so)."""
    pacer, sent, _ = _pacer(0.05)
    seqs = []
    for _ in range(3):
        notice = pacer.inline("r", "main")
        assert notice is not None and not notice.paced
        seqs.append(notice.seq)
        time.sleep(0.08)
    assert seqs == sorted(seqs) and len(set(seqs)) == 3
    assert (pacer.plain_sent, pacer.held, sent) == (3, 0, [])


def test_past_the_pace_a_branch_still_holding_or_owing_sends_a_paced_notice() -> None:
    """A plain notice ends the sender's leases: it may go only when no held staging's notice is still to come."""
    pacer, _, _ = _pacer(0.05)
    assert pacer.inline("r", "main") is not None and pacer.inline("r", "main") is not None  # plain, then paced
    assert pacer.inline("r", "main") is None  # held, its transaction still running
    time.sleep(0.08)
    held = pacer.inline("r", "main")
    assert held is not None and held.paced  # past the pace, but a held staging has owed nothing yet
    time.sleep(0.08)
    pacer.owe("r", "main", notify.dirs_detail([b"a/f"]))  # the held one commits: a notice is due, not yet sent
    owing = pacer.inline("r", "main")
    assert owing is None or owing.paced


def test_a_held_staging_that_failed_owes_its_notice_and_ends_its_hold() -> None:
    """It may have committed (a lost connection after COMMIT): its notice goes, and after it plain ones again."""
    pacer, sent, went = _pacer(0.05)
    pacer.inline("r", "main")
    pacer.inline("r", "main")
    assert pacer.inline("r", "main") is None
    pacer.owe("r", "main", notify.dirs_detail([b"a/f"]))  # what the staging code calls when the held one raised
    assert went.wait(10) and [changed_dirs(d) for _, _, d, _ in sent] == [["a"]]
    time.sleep(0.08)
    after = pacer.inline("r", "main")
    assert after is not None and not after.paced


def test_after_an_owed_notice_failed_to_go_no_plain_notice_ends_the_lease_before_it_ran_out() -> None:
    """The listeners' lease is what re-delivers a lost owed notice's change: a plain notice ending it early would
    leave other hosts without it."""
    calls: list[str] = []
    went = threading.Event()

    def send(repo: str, branch: str, detail: str, notice: notify.Notice) -> None:
        calls.append(detail)
        went.set()
        raise OSError("the database went away")

    pacer = notify.Pacer(send, pace=0.05)
    pacer.inline("r", "main")
    pacer.inline("r", "main")
    assert pacer.inline("r", "main") is None
    pacer.owe("r", "main", notify.dirs_detail([b"a/f"]))
    assert went.wait(10) and [changed_dirs(d) for d in calls] == [["a"]]
    time.sleep(0.08)
    unsure = pacer.inline("r", "main")
    assert unsure is not None and unsure.paced  # past the pace, nothing held or owed, yet paced
    assert pacer.owed_sent == 0
    pacer._last[("r", "main")] -= notify.LEASE_S + 0.05  # as if no notice went for as long as a lease
    after = pacer.inline("r", "main")
    assert after is not None and not after.paced


def test_a_staging_that_changed_what_no_directory_names_owes_the_whole_branch() -> None:
    pacer, sent, _ = _pacer(60.0)
    assert pacer.inline("r", "main") and pacer.inline("r", "main")
    assert pacer.inline("r", "main") is None and pacer.inline("r", "main") is None
    pacer.owe("r", "main", notify.dirs_detail([b"a/f"]))
    pacer.owe("r", "main", "")  # more than DIRS_MOST directories, or a key no directory shows
    pacer.flush()
    assert [(r, b, d) for r, b, d, _ in sent] == [("r", "main", "")]


def test_after_a_failed_staging_that_was_to_send_the_notice_the_next_sends_its_own() -> None:
    """Otherwise the stagings after it would owe a notice while no listener holds a lease of the branch."""
    pacer, _, _ = _pacer(60.0)
    assert pacer.inline("r", "main")
    pacer.failed("r", "main")
    again = pacer.inline("r", "main")
    assert again is not None and not again.paced  # as if the failed one never was
    assert pacer.inline("r", "main") and pacer.inline("r", "main") is None


def test_flush_returns_only_once_the_notice_the_pacers_thread_is_sending_went() -> None:
    """Otherwise a caller that flushes and then sends a notice of its own (a test's marker, a process about to
    stop) could have its notice committed before the owed one the thread was still sending (stop 51's loop
    found ``test_notify``'s directories test missing the owed notice: the thread had taken it off the queue)."""
    sending = threading.Event()
    release = threading.Event()
    sent: list[str] = []

    def send(repo: str, branch: str, detail: str, notice: notify.Notice) -> None:
        sending.set()
        assert release.wait(30), "the test never released the owed notice"
        sent.append(detail)

    pacer = notify.Pacer(send, pace=0.05)
    assert pacer.inline("r", "main") and pacer.inline("r", "main") and pacer.inline("r", "main") is None
    pacer.owe("r", "main", notify.dirs_detail([b"a/f"]))
    assert sending.wait(10), "the pacer's thread never sent the owed notice"
    flushed = threading.Event()
    flusher = threading.Thread(target=lambda: (pacer.flush(), flushed.set()))
    flusher.start()
    assert not flushed.wait(0.5), "flush returned while the owed notice was still being sent"
    release.set()
    assert flushed.wait(10), "flush never returned after the owed notice went"
    flusher.join(10)
    assert [changed_dirs(d) for d in sent] == [["a"]] and pacer.owed_sent == 1


class _Clock:
    """The pacer's clock, moved by the test alone (its thread waits in real time and sends nothing before ``now``
    reaches an owed notice's time)."""

    def __init__(self) -> None:
        self.now = 1000.0

    def monotonic(self) -> float:
        return self.now


def test_a_staging_near_the_owed_notices_time_carries_it_and_the_pacers_thread_sends_none(monkeypatch: Any) -> None:
    """Stop 54: the owed notice goes in the staging's own transaction (NOTIFY is sent at its COMMIT), naming what
    the held stagings changed and what it writes, instead of a transaction of the pacer's thread; not before
    ``CARRY`` of the pace ahead of its time, and a staging that does not say it can carry one never does."""
    clock = _Clock()
    monkeypatch.setattr(notify, "time", clock)
    pacer, sent, _ = _pacer(100.0)  # the pacer's thread waits for its time in real seconds: this long, never in the test
    assert pacer.inline("r", "main") and pacer.inline("r", "main")  # plain, then the paced one: the lease
    last = clock.now
    assert pacer.inline("r", "main", carry=True) is None  # held
    pacer.owe("r", "main", notify.dirs_detail([b"a/f"]))
    clock.now = last + (1 - notify.CARRY) * 100.0 - 1
    assert pacer.inline("r", "main", carry=True) is None  # too early to carry: held
    pacer.owe("r", "main", notify.dirs_detail([b"b/f"]))
    clock.now = last + (1 - notify.CARRY) * 100.0 + 1
    assert pacer.inline("r", "main") is None  # (an lsm append's notice names its file: it carries nothing)
    pacer.owe("r", "main", notify.dirs_detail([b"c/f"]))
    carrier = pacer.inline("r", "main", carry=True)
    assert carrier is not None and carrier.paced and carrier.carried
    assert changed_dirs(carrier.detail(notify.dirs_detail([b"d/e/f"]))) == ["a", "b", "c", "d/e"]
    assert pacer.inline("r", "main", carry=True) is None  # the carrier's notice renewed the lease
    clock.now += 500.0
    pacer.flush()
    assert sent == [] and (pacer.carried, pacer.owed_sent) == (1, 0)


def test_an_owed_notice_goes_a_pace_after_its_first_staging_began_so_a_staging_just_past_the_pace_carries_it(
    monkeypatch: Any,
) -> None:
    """Stop 55: an owed notice is due a pace after the first held staging it names began (none of them waits longer
    than the pace after its commit), never before the pace since the last notice nor more than ``CARRY`` of it
    after: a staging that begins just past the pace still carries it (under load a crowd's stagings came ~0.15 s
    apart, and owed notices due at the pace went alone, a transaction each: 8 of 17 in a 15 s window)."""
    clock = _Clock()
    monkeypatch.setattr(notify, "time", clock)
    pacer, sent, _ = _pacer(100.0)  # (the pacer's thread waits in real seconds: never reaches a due time here)
    assert pacer.inline("r", "main") and pacer.inline("r", "main")  # plain, then the paced one: the lease
    last = clock.now
    clock.now = last + 5.0
    assert pacer.inline("r", "main", carry=True) is None  # the first held staging begins 5 s into the pace
    clock.now = last + 30.0
    assert pacer.inline("r", "main", carry=True) is None
    pacer.owe("r", "main", notify.dirs_detail([b"a/f"]))
    pacer.owe("r", "main", notify.dirs_detail([b"b/f"]))
    assert pacer._due[("r", "main")] == last + 5.0 + 100.0  # its first staging's start plus the pace
    clock.now = last + 100.0 + 3.0  # past the pace, short of that: a staging beginning now carries it
    carrier = pacer.inline("r", "main", carry=True)
    assert carrier is not None and carrier.carried and changed_dirs(carrier.detail(notify.dirs_detail([b"c/f"]))) == ["a", "b", "c"]

    # A first staging held late in the pace: due no later than CARRY of the pace after the pace.  Another held
    # staging, begun earlier, is still in flight when a staging carries the notice: the next is timed from then.
    last = clock.now
    clock.now = last + 50.0
    assert pacer.inline("r", "main", carry=True) is None  # in flight until below
    clock.now = last + 99.0
    assert pacer.inline("r", "main", carry=True) is None
    pacer.owe("r", "main", notify.dirs_detail([b"d/f"]))
    assert pacer._due[("r", "main")] == last + notify.CARRY * 100.0 + 100.0
    clock.now = last + 100.0 + 5.0
    carrier = pacer.inline("r", "main", carry=True)  # carries d; the one in flight has not committed yet
    assert carrier is not None and carrier.carried
    paid = clock.now
    clock.now = paid + 50.0
    pacer.owe("r", "main", notify.dirs_detail([b"e/f"]))  # it commits after the notice went
    assert pacer._due[("r", "main")] == paid + 100.0
    clock.now += 500.0
    pacer.flush()
    assert [changed_dirs(d) for _, _, d, _ in sent] == [["e"]]


def test_what_a_failed_staging_carried_is_owed_again_at_once(monkeypatch: Any) -> None:
    clock = _Clock()
    monkeypatch.setattr(notify, "time", clock)
    pacer, sent, went = _pacer(100.0)  # (as above: the pacer's thread never reaches the owed notice's time itself)
    assert pacer.inline("r", "main") and pacer.inline("r", "main")
    assert pacer.inline("r", "main", carry=True) is None
    pacer.owe("r", "main", notify.dirs_detail([b"a/f"]))
    # Inside the carry window, short of the due time: the pacer's thread, woken by ``owe`` and reading this clock
    # late under load, must find nothing due yet (at the due time itself it could send the notice before the carrier).
    clock.now += (1 - notify.CARRY) * 100.0 + 1
    carrier = pacer.inline("r", "main", carry=True)
    assert carrier is not None and carrier.carried
    pacer.failed("r", "main", carrier)  # its transaction never committed: its notice never went
    assert went.wait(10), "what the failed staging carried was never sent"
    assert [(changed_dirs(d), n.paced) for _, _, d, n in sent] == [(["a"], True)]


def test_a_carried_whole_branch_stays_the_whole_branch() -> None:
    notice = notify.Notice(True, 3, True, None)
    assert notice.detail(notify.dirs_detail([b"a/f"])) == ""
    assert notify.Notice(True, 3, True, frozenset({"a"})).detail("") == ""
    assert notify.Notice(True, 3).detail("x") == "x"


def _change(sender: str, notice: notify.Notice | None, branch: str = "main") -> tuple[notify.Change, notify.Notice | None]:
    got = notify._parse(notify.payload(sender, notify.STAGING, "r", branch, notice=notice) + "\tdirs\x1fa")
    assert got is not None and got[0] == notify.Change(sender, notify.STAGING, "r", branch, "dirs\x1fa")
    return got


def test_a_notice_says_whether_it_is_paced_and_its_number() -> None:
    for notice in (None, notify.Notice(True, 7), notify.Notice(False, 12)):
        assert _change("ab12", notice)[1] == notice
    assert notify.parse("x~\tstaging\tr\tmain") == notify.Change("x~", notify.STAGING, "r", "main")  # no number: no notice


def test_a_lease_runs_out_into_the_whole_branch_unless_a_later_plain_notice_ended_it() -> None:
    leases = notify.Leases()
    change, notice = _change("s", notify.Notice(True, 5))
    assert notice is not None
    leases.heard(change, notice, 100.0)
    other, paced = _change("s", notify.Notice(True, 6), "dev")
    assert paced is not None
    leases.heard(other, paced, 100.0)
    assert leases.ended(100.0 + notify.LEASE_S - 0.01) == []
    plain = notify.Notice(False, 9)
    leases.heard(change, plain, 101.0)  # main's sender staged nothing unannounced since notice 5
    assert leases.ended(100.0 + notify.LEASE_S) == [notify.Change("s", notify.STAGING, "r", "dev")]
    assert len(leases) == 0


def test_a_plain_notice_ends_only_the_leases_numbered_before_it() -> None:
    """Two stagings' transactions in flight commit in either order: a paced notice numbered after a plain one
    keeps its lease; one numbered before it, heard after it, takes none."""
    leases = notify.Leases()
    change, _ = _change("s", None)
    leases.heard(change, notify.Notice(True, 8), 0.0)
    leases.heard(change, notify.Notice(False, 7), 0.5)  # the plain one decided first, committed last
    assert leases.first_end() == notify.LEASE_S
    assert leases.ended(notify.LEASE_S) == [notify.Change("s", notify.STAGING, "r", "main")]
    leases.heard(change, notify.Notice(False, 10), 3.0)
    leases.heard(change, notify.Notice(True, 9), 3.1)  # older than the plain one heard: no lease
    assert leases.first_end() is None
    leases.heard(change, notify.Notice(True, 11), 3.2)
    assert leases.first_end() == 3.2 + notify.LEASE_S
