"""``notify.Pacer``: a process's staging notices of a branch, at most one per pace (no database needed)."""

from __future__ import annotations

import threading
import time

from lakemount.catalog.kept import changed_dirs
from lakemount.metastore import notify


def _pacer(pace: float) -> tuple[notify.Pacer, list[tuple[str, str, str]], threading.Event]:
    sent: list[tuple[str, str, str]] = []
    went = threading.Event()

    def send(repo: str, branch: str, detail: str) -> None:
        sent.append((repo, branch, detail))
        went.set()

    return notify.Pacer(send, pace=pace), sent, went


def test_the_stagings_within_the_pace_owe_one_notice_naming_all_they_changed() -> None:
    pacer, sent, went = _pacer(0.3)
    assert pacer.inline("r", "main")
    t = time.monotonic()
    assert not pacer.inline("r", "main") and not pacer.inline("r", "main")
    assert pacer.inline("r", "dev")  # branches are paced apart
    pacer.owe("r", "main", notify.dirs_detail([b"a/f"]))
    pacer.owe("r", "main", notify.dirs_detail([b"b/c/f"]))
    assert went.wait(10)
    assert time.monotonic() - t >= 0.25  # not before the pace allowed
    assert [(r, b, changed_dirs(d)) for r, b, d in sent] == [("r", "main", ["a", "b/c"])]
    assert (pacer.inline_sent, pacer.held, pacer.owed_sent) == (2, 2, 1)


def test_a_staging_that_changed_what_no_directory_names_owes_the_whole_branch() -> None:
    pacer, sent, _ = _pacer(60.0)
    assert pacer.inline("r", "main")
    assert not pacer.inline("r", "main")
    pacer.owe("r", "main", notify.dirs_detail([b"a/f"]))
    pacer.owe("r", "main", "")  # more than DIRS_MOST directories, or a key no directory shows
    pacer.flush()
    assert sent == [("r", "main", "")]


def test_after_a_failed_staging_that_was_to_send_the_notice_the_next_sends_its_own() -> None:
    """Otherwise the stagings after it would owe a notice while no listener holds a lease of the branch."""
    pacer, _, _ = _pacer(60.0)
    assert pacer.inline("r", "main")
    pacer.failed("r", "main")
    assert pacer.inline("r", "main")
    assert not pacer.inline("r", "main")


def test_flush_returns_only_once_the_notice_the_pacers_thread_is_sending_went() -> None:
    """Otherwise a caller that flushes and then sends a notice of its own (a test's marker, a process about to
    stop) could have its notice committed before the owed one the thread was still sending (stop 51's loop
    found ``test_notify``'s directories test missing the owed notice: the thread had taken it off the queue)."""
    sending = threading.Event()
    release = threading.Event()
    sent: list[str] = []

    def send(repo: str, branch: str, detail: str) -> None:
        sending.set()
        assert release.wait(30), "the test never released the owed notice"
        sent.append(detail)

    pacer = notify.Pacer(send, pace=0.05)
    assert pacer.inline("r", "main") and not pacer.inline("r", "main")
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
