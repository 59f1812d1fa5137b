"""The runner: which events run which hooks, pre-events abort, post-events never undo, bounds (``actions/runner.py``)."""

from __future__ import annotations

import http.server
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from lakemount.catalog.catalog import Catalog
from lakemount.errors import HookFailed, NotFound
from tests.actions.conftest import Hooked, R, action, policy_cat, webhook_action


def test_post_hooks_never_undo(cat: Catalog, webhook: dict[str, Any]) -> None:
    action(cat, "main", "notify", webhook_action(webhook["url"], "post-commit"))
    webhook["mode"] = "reject"
    c = cat.commit(R, "main", "kept").commit
    assert cat.commit_of(R, "main").id == c.id
    (run,) = cat.actions.store.list_runs(R)
    assert run.event_type == "post-commit" and run.status == "failed" and run.commit_id == c.id
    assert webhook["events"][0]["body"]["commit_id"] == c.id


def test_merge_and_branch_and_tag_events(cat: Catalog, webhook: dict[str, Any]) -> None:
    cat.create_branch(R, "feat-1", "main")
    action(cat, "feat-1", "notify", webhook_action(webhook["url"], "pre-merge"))
    cat.commit(R, "feat-1", "add action")
    webhook["mode"] = "reject"
    with pytest.raises(HookFailed, match="pre-merge rejected"):
        cat.merge(R, "feat-1", "main")
    assert cat.get_optional(R, "main", "_lakefs_actions/notify.yaml") is None
    webhook["mode"] = "ok"
    assert cat.merge(R, "feat-1", "main").merged
    body = webhook["events"][-1]["body"]
    assert (body["event_type"], body["branch_id"], body["source_ref"]) == ("pre-merge", "main", "feat-1")
    everything = """
name: all refs
on: {pre-create-branch: {}, post-create-branch: {}, pre-delete-branch: {}, pre-create-tag: {}, pre-delete-tag: {}}
hooks: [{id: n, type: webhook, properties: {url: URL}}]
""".replace("URL", webhook["url"])
    action(cat, "main", "refs", everything)
    cat.commit(R, "main", "ref hooks")
    webhook["events"].clear()
    cat.create_branch(R, "dev", "main")
    cat.create_tag(R, "v1", "main")
    cat.delete_tag(R, "v1")
    cat.delete_branch(R, "dev")
    kinds = [(e["body"]["event_type"], e["body"]["branch_id"], e["body"].get("tag_id")) for e in webhook["events"]]
    assert kinds == [
        ("pre-create-branch", "dev", None), ("post-create-branch", "dev", None),
        ("pre-create-tag", "", "v1"), ("pre-delete-tag", "", "v1"), ("pre-delete-branch", "dev", None),
    ]
    webhook["mode"] = "reject"
    with pytest.raises(HookFailed):
        cat.create_branch(R, "dev2", "main")
    with pytest.raises(NotFound):
        cat.get_branch(R, "dev2")


def test_unknown_hook_types_and_broken_action_files_fail_the_pre_event(cat: Catalog) -> None:
    action(cat, "main", "notify", "name: n\non: {pre-commit: {}}\nhooks: [{id: h, type: shell}]")
    with pytest.raises(HookFailed, match="unknown hook type 'shell'"):
        cat.commit(R, "main", "m")
    action(cat, "main", "notify", "name: [broken")
    with pytest.raises(HookFailed, match="not valid YAML"):
        cat.commit(R, "main", "m")


def test_hooks_running_at_once_are_bounded_per_process(tmp_path: Path) -> None:
    # Slow hooks ran unbounded in parallel: every commit under a webhook that takes its whole timeout held
    # a server thread and a connection. With max_running 2, the third at once waits max_wait, then fails.
    lock = threading.Lock()
    state = {"now": 0, "most": 0, "calls": 0}
    # While ``hold`` is set a webhook answers only once ``release`` is: the refusals happen while two hooks
    # hang, however slow the machine (a fixed 1.5 s let a late third commit find a free slot).
    hold, release = threading.Event(), threading.Event()

    class Slow(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            with lock:
                state["now"] += 1
                state["calls"] += 1
                state["most"] = max(state["most"], state["now"])
            if hold.is_set():
                release.wait(120)
            with lock:
                state["now"] -= 1
            self.send_response(200)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"ok")

    server = Hooked(("127.0.0.1", 0), Slow)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        c = policy_cat(tmp_path, LAKEMOUNT_ACTIONS_HOOKS_MAX_RUNNING="2", LAKEMOUNT_ACTIONS_HOOKS_MAX_WAIT="0.5")
        action(c, "main", "notify", webhook_action(f"http://127.0.0.1:{server.server_address[1]}/hook", timeout="2m"))  # the hold, not it, ends a hook
        c.commit(R, "main", "the action")
        assert state["calls"] == 1
        branches = [f"feat-{i}" for i in range(5)]
        for b in branches:
            c.create_branch(R, b, "main")
            c.put(R, b, "x", b.encode())
        outcomes: dict[str, str] = {}

        def commit(b: str) -> None:
            try:
                c.commit(R, b, "m")
                outcomes[b] = "committed"
            except HookFailed as exc:
                outcomes[b] = str(exc)

        hold.set()
        threads = [threading.Thread(target=commit, args=(b,)) for b in branches]
        for t in threads:
            t.start()
        deadline = time.monotonic() + 60
        while not (state["now"] == 2 and sum(o != "committed" for o in outcomes.values()) == 3):
            assert time.monotonic() < deadline, f"two hooks never hung with three commits refused: {state} {outcomes}"
            time.sleep(0.01)
        assert c.stat(R, "main", "seed.txt").size == 4  # the catalog answers others meanwhile ...
        assert state["now"] == 2  # ... while both hooks still hang
        release.set()
        for t in threads:
            t.join(30)
        assert not any(t.is_alive() for t in threads)
        assert state["most"] == 2, state  # never more than max_running webhooks in flight
        committed = [b for b, o in outcomes.items() if o == "committed"]
        refused = [o for o in outcomes.values() if o != "committed"]
        assert len(committed) == 2 and len(refused) == 3, outcomes
        for message in refused:
            assert "not run: 2 hooks were already running in this process (actions.hooks.max_running)" in message
            assert "0.5s it may wait (actions.hooks.max_wait)" in message
        assert state["calls"] == 3
        # Once they are done, hooks run again.
        c.put(R, "main", "y", b"y")
        c.commit(R, "main", "after")
        assert state["calls"] == 4
    finally:
        release.set()
        server.shutdown()
        server.server_close()


def test_action_files_past_their_limits_fail_the_pre_event(tmp_path: Path, webhook: dict[str, Any]) -> None:
    # An action file over 1 MiB was skipped without a word (a guard padded with a comment stopped guarding),
    # and an event read every action file at the ref, however many, into memory.
    c = policy_cat(tmp_path, LAKEMOUNT_ACTIONS_MAX_FILES="3")
    guard = webhook_action(webhook["url"])
    action(c, "main", "padded", guard + "#" + "x" * (1 << 20) + "\n")
    with pytest.raises(HookFailed, match=r"_lakefs_actions/padded\.yaml: larger than 1048576 bytes"):
        c.commit(R, "main", "m")
    c.delete(R, "main", "_lakefs_actions/padded.yaml")
    for i in range(3):
        action(c, "main", f"a{i}", guard.replace("name: hook it", f"name: hook {i}"))
    c.commit(R, "main", "three actions")
    assert len(webhook["events"]) == 3
    action(c, "main", "a3", guard)
    with pytest.raises(HookFailed, match=r"more than 3 action files at main \(actions\.max_files\): none of them run"):
        c.commit(R, "main", "m")
    assert len(webhook["events"]) == 3  # none ran
    (listed, *_) = c.actions.store.list_runs(R, limit=1)
    assert c.actions.store.get_run(R, listed.run_id).hooks[0].hook_id == "(action file)"


def test_revert_and_cherry_pick_run_their_hooks_around_the_commit(cat: Catalog, webhook: dict[str, Any]) -> None:
    """Both verbs share one sequence (``HistoryVerbs._replayed``): the pre-hook read from the branch, the commit, the
    feed's event naming the ref, the post-hook at the new commit; a rejecting pre-hook leaves no commit and no event."""
    hooks = """
name: history
on: {pre-revert: {}, post-revert: {}, pre-cherry-pick: {}, post-cherry-pick: {}}
hooks: [{id: n, type: webhook, properties: {url: URL}}]
""".replace("URL", webhook["url"])
    action(cat, "main", "history", hooks)
    cat.commit(R, "main", "hooks")
    cat.put(R, "main", "a.txt", b"a")
    added = cat.commit(R, "main", "add a").commit
    cat.create_branch(R, "feat-1", "main")
    cat.put(R, "feat-1", "b.txt", b"b")
    picked = cat.commit(R, "feat-1", "add b").commit
    webhook["events"].clear()
    reverted = cat.revert(R, "main", added.id)
    copied = cat.cherry_pick(R, "main", picked.id)
    seen = [(e["body"]["event_type"], e["body"]["source_ref"], e["body"].get("commit_id")) for e in webhook["events"]]
    assert seen == [("pre-revert", added.id, None), ("post-revert", added.id, reverted.id),
                    ("pre-cherry-pick", picked.id, None), ("post-cherry-pick", picked.id, copied.id)]
    feed = [(e.kind, e.payload) for e in cat.feed.read(R, branch="main") if e.kind in ("revert", "cherry-pick")]
    assert feed == [("revert", {"reverted": added.id, "commit_id": reverted.id, "committer": "lakemount"}),
                    ("cherry-pick", {"picked": picked.id, "commit_id": copied.id, "committer": "lakemount"})]
    webhook["mode"] = "reject"
    with pytest.raises(HookFailed, match="pre-revert rejected"):
        cat.revert(R, "main", copied.id)
    with pytest.raises(HookFailed, match="pre-cherry-pick rejected"):
        cat.cherry_pick(R, "main", picked.id)
    assert cat.commit_of(R, "main").id == copied.id
    assert [e.kind for e in cat.feed.read(R, branch="main") if e.kind in ("revert", "cherry-pick")] == [k for k, _ in feed]
