"""The ``webhook`` hook type: what it sends, which answers fail it, and its timeouts (``actions/webhook.py``)."""

from __future__ import annotations

import http.server
import socket
import threading
from pathlib import Path
from typing import Any

import pytest

from lakemount.actions.hook import HookFailure
from lakemount.actions.webhook import parse_duration
from lakemount.app import App
from lakemount.catalog.catalog import Catalog
from lakemount.config import load
from lakemount.errors import HookFailed, InvalidArgument, PermissionDenied, category_of
from tests.actions.conftest import Hooked, R, action, policy_cat, webhook_action


def test_webhook_accepts_and_gets_the_event(cat: Catalog, webhook: dict[str, Any]) -> None:
    action(cat, "main", "notify", webhook_action(webhook["url"], "pre-commit"))
    cat.put(R, "main", "t/a.csv", b"a\n")
    c = cat.commit(R, "main", "with hook", committer="ann", metadata=[("k", "v")]).commit
    (ev,) = webhook["events"]
    assert ev["path"] == "/hook?check=all" and ev["headers"]["X-Team"] == "data"
    body = ev["body"]
    assert body["event_type"] == "pre-commit" and body["repository_id"] == R and body["branch_id"] == "main"
    assert body["commit_message"] == "with hook" and body["committer"] == "ann" and body["commit_metadata"] == {"k": "v"}
    assert body["hook_id"] == "notify" and body["action_name"] == "hook it"
    (run,) = cat.actions.store.list_runs(R)
    assert run.status == "completed" and run.event_type == "pre-commit" and run.branch == "main"
    full = cat.actions.store.get_run(R, run.run_id)
    assert [(h.hook_id, h.status) for h in full.hooks] == [("notify", "completed")]
    assert full.hooks[0].output == "200 fine" and full.hooks[0].duration >= 0
    assert cat.commit_of(R, "main").id == c.id


@pytest.mark.parametrize(
    ("mode", "message"),
    [
        ("reject", "webhook answered 422: bad [31mdata in tables/x"),
        ("hang", "webhook timed out after 1s"),
        ("garbage", "webhook gave no valid HTTP response"),
    ],
)
def test_a_failing_pre_commit_webhook_aborts_the_commit(cat: Catalog, webhook: dict[str, Any], mode: str, message: str) -> None:
    action(cat, "main", "notify", webhook_action(webhook["url"], "pre-commit", timeout="1s"))
    webhook["mode"] = mode
    head = cat.commit_of(R, "main").id
    with pytest.raises(HookFailed) as info:
        cat.commit(R, "main", "refused")
    if mode == "hang":  # the server hangs until teardown: the commit's own 1 s timeout ended it
        assert webhook["hung_up"].wait(30), "the webhook server never saw the client give up while it hung"
    assert category_of(info.value) is PermissionDenied
    assert message in str(info.value) and "pre-commit rejected by hook hook it/notify" in str(info.value)
    assert "\x00" not in str(info.value) and len(str(info.value)) < 700
    assert cat.commit_of(R, "main").id == head
    assert [r.key for r in cat.diff_uncommitted(R, "main")] == [b"_lakefs_actions/notify.yaml"]  # nothing lost
    run = cat.actions.store.get_run(R, info.value.run_id)
    assert run.status == "failed" and run.hooks[0].status == "failed" and message in run.hooks[0].output


def test_an_unreachable_webhook_fails_the_hook(cat: Catalog) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    action(cat, "main", "notify", webhook_action(f"http://127.0.0.1:{port}/x"))
    with pytest.raises(HookFailed, match="webhook unreachable"):
        cat.commit(R, "main", "m")


def test_webhook_does_not_follow_redirects(cat: Catalog) -> None:
    """A webhook answering 30x must not send the server on (POST 302 becomes a GET elsewhere in urllib)."""
    got: list[str] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            got.append("POST " + self.path)
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            self.send_response(302)
            self.send_header("Location", "/secret")
            self.send_header("Content-Length", "0")
            self.end_headers()

        def do_GET(self) -> None:
            got.append("GET " + self.path)
            body = b"instance-secret"
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = Hooked(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        action(cat, "main", "notify", webhook_action(f"http://127.0.0.1:{server.server_address[1]}/hook", "post-commit"))
        cat.commit(R, "main", "m")
        (listed,) = cat.actions.store.list_runs(R, limit=1)
        run = cat.actions.store.get_run(R, listed.run_id)
        assert run.status == "failed"
        assert "answered 302 (redirect to /secret): redirects are not followed" in run.hooks[0].output
        assert "instance-secret" not in run.hooks[0].output
        assert got == ["POST /hook?check=all"]
    finally:
        server.shutdown()
        server.server_close()


def test_webhook_timeout_bounds_the_whole_exchange(cat: Catalog, webhook: dict[str, Any]) -> None:
    # The timeout bounded each socket read only: 40 bytes at 0.2 s each held the commit for 8 s (a byte a
    # minute: for ever).
    # The answer trickles for two minutes, a byte every 0.2 s: a per-read timeout never fires on it.
    action(cat, "main", "notify", webhook_action(webhook["url"], "pre-commit", timeout="1s"))
    webhook["mode"] = "trickle"
    with pytest.raises(HookFailed, match="webhook timed out after 1s"):
        cat.commit(R, "main", "m")
    assert webhook["hung_up"].wait(30), "the webhook server never saw the client hang up on its trickle"
    assert webhook["sent"] < 600  # the client quit while the answer was still arriving


def test_a_webhook_timeout_over_the_configured_maximum_fails_the_hook(tmp_path: Path, webhook: dict[str, Any]) -> None:
    # Any timeout was taken: an action file asking for 1000h held its commit, and a server thread, that long.
    c = policy_cat(tmp_path)
    action(c, "main", "notify", webhook_action(webhook["url"], timeout="1000h"))
    with pytest.raises(HookFailed, match=r"webhook timeout 1000h is more than actions\.webhook\.max_timeout \(300s\)"):
        c.commit(R, "main", "m")
    assert webhook["events"] == []  # refused before connecting
    action(c, "main", "notify", webhook_action(webhook["url"], timeout="5m"))  # the maximum itself is fine
    c.commit(R, "main", "m")
    assert len(webhook["events"]) == 1
    # Configured lower: 5s is too much, and a webhook without a timeout waits the maximum, not 1m.
    low = policy_cat(tmp_path / "low", LAKEMOUNT_ACTIONS_WEBHOOK_MAX_TIMEOUT="1")
    action(low, "main", "notify", webhook_action(webhook["url"], timeout="5s"))
    with pytest.raises(HookFailed, match=r"webhook timeout 5s is more than actions\.webhook\.max_timeout \(1s\)"):
        low.commit(R, "main", "m")
    action(low, "main", "notify", webhook_action(webhook["url"]).replace("      timeout: 2s\n", ""))
    webhook["mode"] = "hang"  # until teardown: the maximum (1 s), not a default of a minute, ended the wait
    with pytest.raises(HookFailed, match="webhook timed out after 1s"):
        low.commit(R, "main", "m")
    assert webhook["hung_up"].wait(30), "the webhook server never saw the client give up while it hung"
    with pytest.raises(InvalidArgument, match="actions.webhook.max_timeout: must be positive"):
        assert App(load(env={"LAKEMOUNT_HOME": str(tmp_path / "h4"), "LAKEMOUNT_ACTIONS_WEBHOOK_MAX_TIMEOUT": "0"})).webhook_policy


def test_timeouts_are_go_durations() -> None:
    assert parse_duration("1m30s") == 90 and parse_duration("500ms") == 0.5 and parse_duration(3) == 3
    for bad in ("30", "1m30", "-1s", "0s", "1d"):
        with pytest.raises(HookFailure, match="bad timeout"):
            parse_duration(bad)
