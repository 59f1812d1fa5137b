"""Hooks (lakeFS actions) in the catalog: action files, webhooks, built-in data checks, recorded runs."""

from __future__ import annotations

import http.server
import io
import json
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lakemount.app import App
from lakemount.catalog.actions import parse_action
from lakemount.catalog.catalog import Catalog
from lakemount.catalog.hooks import WebhookPolicy, parse_duration, parse_size
from lakemount.config import load
from lakemount.errors import HookFailed, InvalidArgument, NotFound, PermissionDenied, category_of
from lakemount.metastore.actions import SqlRunStore

R = "hooked"


@pytest.fixture
def cat(tmp_path: Path) -> Catalog:
    app = App(load(env={"LAKEMOUNT_HOME": str(tmp_path / "home"), "LAKEMOUNT_CACHE_DISK_BYTES": "0"}))
    c = app.catalog
    c.create_repository(R)
    c.put(R, "main", "seed.txt", b"seed")
    c.commit(R, "main", "seed")
    return c


def action(cat: Catalog, branch: str, name: str, text: str) -> None:
    cat.put(R, branch, f"_lakefs_actions/{name}.yaml", text.encode())


class Hooked(http.server.ThreadingHTTPServer):
    daemon_threads = True


@pytest.fixture
def webhook() -> Iterator[dict[str, Any]]:
    """A local HTTP server; ``state['mode']`` picks its behaviour, ``state['events']`` collects what it got."""
    state: dict[str, Any] = {"mode": "ok", "events": []}

    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            state["events"].append({"path": self.path, "headers": dict(self.headers), "body": json.loads(body)})
            mode = state["mode"]
            if mode == "hang":
                time.sleep(5)
                return
            if mode == "trickle":  # an answer a byte at a time, each well within the socket timeout
                self.send_response(200)
                self.send_header("Content-Length", "40")
                self.end_headers()
                for _ in range(40):
                    try:
                        self.wfile.write(b"x")
                        self.wfile.flush()
                    except OSError:
                        return
                    time.sleep(0.2)
                return
            if mode == "garbage":
                self.wfile.write(b"\x00\xffNOT HTTP AT ALL\r\n\r\n")
                return
            status, text = (200, b"fine") if mode == "ok" else (422, b"bad \x1b[31mdata\x00 in tables/x\n" + b"y" * 2000)
            self.send_response(status)
            self.send_header("Content-Length", str(len(text)))
            self.end_headers()
            self.wfile.write(text)

    server = Hooked(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    state["url"] = f"http://127.0.0.1:{server.server_address[1]}/hook"
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()


def webhook_action(url: str, events: str = "pre-commit", timeout: str = "2s") -> str:
    return f"""
name: hook it
on:
  {events}:
    branches: [main, "feat-*"]
hooks:
  - id: notify
    type: webhook
    properties:
      url: {url}
      timeout: {timeout}
      query_params: {{check: all}}
      headers: {{X-Team: data}}
"""


def test_action_files_parse_and_refuse_bad_input() -> None:
    a = parse_action(webhook_action("http://x/y", "pre-merge"), "_lakefs_actions/a.yaml")
    assert a.name == "hook it" and a.on == {"pre-merge": ("main", "feat-*")}
    assert a.matches("pre-merge", "feat-1") and not a.matches("pre-merge", "dev") and not a.matches("pre-commit", "main")
    assert parse_action("name: all\non:\n  post-commit:\nhooks: [{id: a, type: webhook}]").matches("post-commit", "any")
    for bad, why in [
        ("[1, 2", "not valid YAML"),
        ("- a", "expected a mapping"),
        ("on: {pre-commit: {}}\nhooks: [{id: a, type: webhook}]", "'name' is required"),
        ("name: n\non: {pre-push: {}}\nhooks: [{id: a, type: webhook}]", "unknown event"),
        ("name: n\non: {pre-commit: {branches: main}}\nhooks: [{id: a, type: webhook}]", "must be a list"),
        ("name: n\non: {pre-commit: {}}\nhooks: []", "non-empty list"),
        ("name: n\non: {pre-commit: {}}\nhooks: [{id: a, type: webhook}, {id: a, type: webhook}]", "duplicate"),
    ]:
        with pytest.raises(InvalidArgument, match=why):
            parse_action(bad, "f.yaml")
    assert parse_duration("1m30s") == 90 and parse_duration("500ms") == 0.5 and parse_duration(3) == 3
    assert parse_size("10MB") == 10_000_000 and parse_size("1KiB") == 1024 and parse_size(7) == 7


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
    started = time.monotonic()
    with pytest.raises(HookFailed) as info:
        cat.commit(R, "main", "refused")
    assert time.monotonic() - started < 4
    assert category_of(info.value) is PermissionDenied
    assert message in str(info.value) and "pre-commit rejected by hook hook it/notify" in str(info.value)
    assert "\x00" not in str(info.value) and len(str(info.value)) < 700
    assert cat.commit_of(R, "main").id == head
    assert [r.key for r in cat.diff_uncommitted(R, "main")] == [b"_lakefs_actions/notify.yaml"]  # nothing lost
    run = cat.actions.store.get_run(R, info.value.run_id)
    assert run.status == "failed" and run.hooks[0].status == "failed" and message in run.hooks[0].output


def test_unreachable_webhook_and_unknown_hook_type(cat: Catalog) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    action(cat, "main", "notify", webhook_action(f"http://127.0.0.1:{port}/x"))
    with pytest.raises(HookFailed, match="webhook unreachable"):
        cat.commit(R, "main", "m")
    action(cat, "main", "notify", "name: n\non: {pre-commit: {}}\nhooks: [{id: h, type: shell}]")
    with pytest.raises(HookFailed, match="unknown hook type 'shell'"):
        cat.commit(R, "main", "m")
    action(cat, "main", "notify", "name: [broken")
    with pytest.raises(HookFailed, match="not valid YAML"):
        cat.commit(R, "main", "m")


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


def check_action(props: str, event: str = "pre-commit") -> str:
    return f"name: checks\non: {{{event}: {{branches: [main]}}}}\nhooks: [{{id: data, type: lakemount_check, properties: {props}}}]"


def parquet(table: pa.Table) -> bytes:
    buf = io.BytesIO()
    pq.write_table(table, buf)
    return buf.getvalue()


def refused(cat: Catalog, match: str, **meta: str) -> None:
    with pytest.raises(HookFailed, match=match):
        cat.commit(R, "main", "m", metadata=list(meta.items()))
    cat.reset(R, "main", prefix="t/")


def test_check_allowed_and_denied_paths(cat: Catalog) -> None:
    action(cat, "main", "c", check_action('{allowed_paths: ["t/*.csv"], denied_paths: ["t/tmp_*"]}'))
    cat.put(R, "main", "t/a.csv", b"a\n")
    cat.put(R, "main", "elsewhere.csv", b"a\n")
    refused(cat, r"1 path\(s\) outside allowed_paths: elsewhere.csv")
    cat.reset(R, "main", path="elsewhere.csv")
    cat.put(R, "main", "t/tmp_1.csv", b"a\n")
    refused(cat, "match denied_paths: t/tmp_1.csv")
    cat.put(R, "main", "t/ok.csv", b"a\n")
    cat.commit(R, "main", "fine")
    run = cat.actions.store.list_runs(R)[0]
    assert run.status == "completed"
    assert cat.actions.store.get_run(R, run.run_id).hooks[0].output == "1 object(s) checked: ok"  # refused() reset t/a.csv


def test_check_formats_sizes_and_metadata(cat: Catalog) -> None:
    action(cat, "main", "c", check_action("{formats: [csv, json, parquet], max_size: 1KB, min_size: 2, required_metadata: [owner]}"))
    cat.put(R, "main", "t/a.csv", b"a,b\n1,2\n")
    refused(cat, "missing commit metadata: owner")
    cat.put(R, "main", "t/a.txt", b"text")
    refused(cat, r"not of formats csv, json, parquet: t/a.txt", owner="me")
    cat.put(R, "main", "t/bad.csv", b"a,b\n1,2,3\n")
    refused(cat, r"do not parse as their format: t/bad.csv \(rows have different numbers of fields\)", owner="me")
    cat.put(R, "main", "t/bad.json", b"{nope")
    refused(cat, r"t/bad.json \(bad JSON", owner="me")
    cat.put(R, "main", "t/bad.parquet", b"PAR1 not really")
    refused(cat, r"t/bad.parquet \(", owner="me")
    cat.put(R, "main", "t/big.csv", b"x\n" * 600)
    refused(cat, r"larger than 1000 bytes: t/big.csv \(1200 bytes\)", owner="me")
    cat.put(R, "main", "t/tiny.csv", b"x")
    refused(cat, r"smaller than 2 bytes: t/tiny.csv", owner="me")
    cat.put(R, "main", "t/good.csv", b"a,b\n1,2\n")
    cat.put(R, "main", "t/good.json", b'{"a": 1}')
    cat.put(R, "main", "t/good.parquet", parquet(pa.table({"a": [1]})))
    cat.commit(R, "main", "fine", metadata=[("owner", "me")])


def test_check_parquet_schema_against_the_destination(cat: Catalog) -> None:
    cat.put(R, "main", "t/part-0.parquet", parquet(pa.table({"id": pa.array([1], pa.int64()), "name": ["a"]})))
    cat.commit(R, "main", "table")
    cat.create_branch(R, "feat-x", "main")
    action(cat, "main", "c", check_action("{parquet_schema: compatible}", "pre-merge"))
    cat.commit(R, "main", "guard")
    cat.put(R, "feat-x", "t/part-1.parquet", parquet(pa.table({"id": pa.array(["x"]), "extra": [1.0]})))
    cat.commit(R, "feat-x", "bad schema")
    with pytest.raises(HookFailed, match=r"t/part-1.parquet \(drops column\(s\) name; changes id: int64 -> string\)"):
        cat.merge(R, "feat-x", "main")
    # The destination's guard holds though the source branch never had it.
    assert cat.get_optional(R, "feat-x", "_lakefs_actions/c.yaml") is None
    cat.put(R, "feat-x", "t/part-1.parquet", parquet(pa.table({"id": pa.array([2], pa.int64()), "name": ["b"], "more": [1]})))
    cat.commit(R, "feat-x", "compatible: a column added")
    assert cat.merge(R, "feat-x", "main").merged
    assert cat.actions.store.list_runs(R, branch="main")[0].status == "completed"


def test_unknown_check_properties_fail_the_hook(cat: Catalog) -> None:
    action(cat, "main", "c", check_action("{max_sise: 10}"))
    with pytest.raises(HookFailed, match="unknown lakemount_check properties: max_sise"):
        cat.commit(R, "main", "m")


def test_sql_run_store_pages_newest_first(cat: Catalog) -> None:
    store = cat.actions.store
    assert isinstance(store, SqlRunStore)
    action(cat, "main", "c", "name: n\non: {post-commit: {}}\nhooks: [{id: x, type: lakemount_check}]")
    ids = [cat.commit(R, "main", f"c{i}", allow_empty=True).commit.id for i in range(5)]
    runs = store.list_runs(R)
    assert [r.commit_id for r in runs] == ids[::-1]
    page = store.list_runs(R, limit=2)
    rest = store.list_runs(R, after=page[-1].run_id)
    assert [r.run_id for r in page + rest] == [r.run_id for r in runs]
    assert store.list_runs(R, commit_id=ids[2])[0].commit_id == ids[2]
    with pytest.raises(NotFound):
        store.get_run(R, "nope")


# ---------------------------------------------------------------------------- webhook targets (SSRF)
def policy_cat(tmp_path: Path, **env: str) -> Catalog:
    app = App(load(env={"LAKEMOUNT_HOME": str(tmp_path / "home2"), "LAKEMOUNT_CACHE_DISK_BYTES": "0", **env}))
    c = app.catalog
    c.create_repository(R)
    c.put(R, "main", "seed.txt", b"seed")
    c.commit(R, "main", "seed")
    return c


@pytest.mark.parametrize("url", [
    "http://169.254.169.254/latest/meta-data/",
    "http://[fd00:ec2::254]/latest/meta-data/",
    "http://[::ffff:169.254.169.254]/latest/",
    "http://[64:ff9b::a9fe:a9fe]/latest/",  # NAT64 to 169.254.169.254
    "http://[2002:a9fe:a9fe::1]/latest/",  # 6to4 from 169.254.169.254
    "http://[fe80::1]:8080/x",
])
def test_webhook_to_a_metadata_or_link_local_address_is_refused(cat: Catalog, url: str) -> None:
    action(cat, "main", "notify", webhook_action(url, timeout="5s"))
    t0 = time.monotonic()
    with pytest.raises(HookFailed, match="webhook refused: .* is in actions.webhook.denied_networks") as info:
        cat.commit(R, "main", "m")
    assert time.monotonic() - t0 < 2  # refused before any connection attempt
    run = cat.actions.store.get_run(R, info.value.run_id)
    assert run.status == "failed" and "denied_networks" in run.hooks[0].output


def test_webhook_policy_judges_the_ipv4_address_an_ipv6_one_carries() -> None:
    p = WebhookPolicy.parse("10.0.0.0/8", "10.9.0.0/16")
    assert p.refusal("10.1.2.3") == "" and p.refusal("64:ff9b::a01:203") == "" and p.refusal("::ffff:10.1.2.3") == ""
    assert p.refusal("64:ff9b::a09:1") == "10.9.0.1 is in actions.webhook.denied_networks"
    assert p.refusal("2002:a09:1::") == "10.9.0.1 is in actions.webhook.denied_networks"
    assert p.refusal("64:ff9b::b00:1") == "11.0.0.1 is not in actions.webhook.allowed_networks"
    assert p.refusal("2001:db8::1") == "2001:db8::1 is not in actions.webhook.allowed_networks"
    assert WebhookPolicy.parse("", "").refusal("64:ff9b::a9fe:a9fe") == ""


def test_webhook_policy_is_checked_after_dns_resolution(tmp_path: Path, webhook: dict[str, Any]) -> None:
    port = webhook["url"].split(":")[2].split("/")[0]
    c = policy_cat(tmp_path, LAKEMOUNT_ACTIONS_WEBHOOK_DENIED_NETWORKS="127.0.0.0/8,::1/128")
    action(c, "main", "notify", webhook_action(f"http://localhost:{port}/hook"))
    # Every address localhost resolves to is refused and named: a stock Debian's /etc/hosts gives ::1 too.
    with pytest.raises(HookFailed, match=r"webhook refused: localhost: (.+; )?127\.0\.0\.1 is in actions\.webhook\.denied_networks"):
        c.commit(R, "main", "m")
    assert webhook["events"] == []


def test_webhook_allowed_networks_restrict_and_loopback_stays_allowed_by_default(tmp_path: Path, cat: Catalog,
                                                                                  webhook: dict[str, Any]) -> None:
    action(cat, "main", "notify", webhook_action(webhook["url"]))
    cat.commit(R, "main", "loopback is allowed by default")
    assert len(webhook["events"]) == 1
    c = policy_cat(tmp_path, LAKEMOUNT_ACTIONS_WEBHOOK_ALLOWED_NETWORKS="10.0.0.0/8")
    action(c, "main", "notify", webhook_action(webhook["url"]))
    with pytest.raises(HookFailed, match=r"127\.0\.0\.1 is not in actions.webhook.allowed_networks"):
        c.commit(R, "main", "m")
    assert len(webhook["events"]) == 1
    with pytest.raises(InvalidArgument, match="actions.webhook.denied_networks: not a network"):
        assert App(load(env={"LAKEMOUNT_HOME": str(tmp_path / "h3"), "LAKEMOUNT_ACTIONS_WEBHOOK_DENIED_NETWORKS": "10.0.0.0/8,nope"})).webhook_policy


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


def test_yaml_alias_bombs_are_refused_cheaply(cat: Catalog) -> None:
    # Nine levels of nine aliases: 387 million strings once expanded; the webhook's str() of a header
    # value took a worker's memory (gigabytes) and minutes of CPU.
    levels = ['a0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    levels += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, 9)]
    bomb = "\n".join(levels) + "\nname: bomb\non: {pre-commit: {}}\nhooks: [{id: x, type: webhook, properties: {url: http://127.0.0.1:9/, headers: {X: *a8}}}]\n"
    action(cat, "main", "bomb", bomb)
    t0 = time.monotonic()
    with pytest.raises(HookFailed, match="more than 100000 values once YAML aliases are expanded"):
        cat.commit(R, "main", "m")
    assert time.monotonic() - t0 < 5
    with pytest.raises(InvalidArgument, match="once YAML aliases are expanded"):
        parse_action("a: &a [*a]\nname: n\non: {pre-commit: {}}\nhooks: [{id: x, type: webhook}]")
    # Modest anchors stay usable.
    ok = parse_action("b: &b [main, release-*]\nname: n\non: {pre-commit: {branches: *b}, pre-merge: {branches: *b}}\n"
                      "hooks: [{id: x, type: webhook}]")
    assert ok.matches("pre-merge", "release-1")


def test_webhook_timeout_bounds_the_whole_exchange(cat: Catalog, webhook: dict[str, Any]) -> None:
    # The timeout bounded each socket read only: 40 bytes at 0.2 s each held the commit for 8 s (a byte a
    # minute: for ever).
    action(cat, "main", "notify", webhook_action(webhook["url"], "pre-commit", timeout="1s"))
    webhook["mode"] = "trickle"
    t0 = time.monotonic()
    with pytest.raises(HookFailed, match="webhook timed out after 1s"):
        cat.commit(R, "main", "m")
    assert time.monotonic() - t0 < 4


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
    webhook["mode"] = "hang"
    t0 = time.monotonic()
    with pytest.raises(HookFailed, match="webhook timed out after 1s"):
        low.commit(R, "main", "m")
    assert time.monotonic() - t0 < 4
    with pytest.raises(InvalidArgument, match="actions.webhook.max_timeout: must be positive"):
        assert App(load(env={"LAKEMOUNT_HOME": str(tmp_path / "h4"), "LAKEMOUNT_ACTIONS_WEBHOOK_MAX_TIMEOUT": "0"})).webhook_policy


def test_hooks_running_at_once_are_bounded_per_process(tmp_path: Path) -> None:
    # Slow hooks ran unbounded in parallel: every commit under a webhook that takes its whole timeout held
    # a server thread and a connection. With max_running 2, the third at once waits max_wait, then fails.
    lock = threading.Lock()
    state = {"now": 0, "most": 0, "calls": 0}

    class Slow(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            with lock:
                state["now"] += 1
                state["calls"] += 1
                state["most"] = max(state["most"], state["now"])
            time.sleep(1.5)
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
        action(c, "main", "notify", webhook_action(f"http://127.0.0.1:{server.server_address[1]}/hook", timeout="10s"))
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

        threads = [threading.Thread(target=commit, args=(b,)) for b in branches]
        for t in threads:
            t.start()
        time.sleep(0.2)
        assert c.stat(R, "main", "seed.txt").size == 4  # the catalog answers others meanwhile
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
