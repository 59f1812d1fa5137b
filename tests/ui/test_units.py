"""The web UI without a browser: pages and redirects, CSRF on cookie sessions (basic auth unaffected),
previews (kinds, caps, binary, escaping data stays data) and listing pages, over an in-process ``ApiService``."""

from __future__ import annotations

import base64
import io
import json
import re
from pathlib import Path
from typing import Any

import pytest

from lakemount.serving.http import BytesBody, Request
from tests.gateway.server_fixture import ADMIN_KEY, ADMIN_SECRET, _create_admin

XSS = "<img src=x onerror=alert(1)>.csv"
BASIC = "Basic " + base64.b64encode(f"{ADMIN_KEY}:{ADMIN_SECRET}".encode()).decode()


class Svc:
    def __init__(self, home: Path) -> None:
        from lakemount.api.handler import ApiService
        from lakemount.app import App
        from lakemount.config import load

        env = {"LAKEMOUNT_HOME": str(home)}
        _create_admin(env)
        self.app = App(load(None, env=env))
        self.service = ApiService(self.app)

    def call(self, method: str, path: str, query: str = "", body: bytes = b"", headers: dict[str, str] | None = None) -> Any:
        hdrs = tuple((k.lower(), v) for k, v in (headers or {}).items())
        resp = self.service.handle(Request(method, path, query, hdrs, BytesBody(body)))
        data = resp.body if isinstance(resp.body, bytes) else b"".join(resp.body)
        return resp.status, resp.headers, data

    def login(self) -> tuple[str, str]:
        status, headers, _ = self.call("POST", "/api/v1/auth/login", body=json.dumps(
            {"access_key_id": ADMIN_KEY, "secret_access_key": ADMIN_SECRET}).encode(), headers={"content-type": "application/json"})
        assert status == 200
        cookies = [v.split(";")[0] for k, v in headers if k.lower() == "set-cookie"]
        session = next(c for c in cookies if c.startswith("internal_auth_session="))
        token = next(c for c in cookies if c.startswith("lakemount_csrf=")).split("=", 1)[1]
        assert token and all("HttpOnly" in v for k, v in headers if k.lower() == "set-cookie" and "internal_auth" in v)
        return session, token


@pytest.fixture(scope="module")
def svc(tmp_path_factory: pytest.TempPathFactory) -> Svc:
    s = Svc(tmp_path_factory.mktemp("ui") / "home")
    cat = s.app.catalog
    cat.create_repository("rui")
    return s


def test_root_redirects_to_login_without_a_valid_cookie(svc: Svc) -> None:
    assert svc.call("GET", "/")[0] == 302
    assert dict(svc.call("GET", "/")[1])["Location"] == "/login"
    forged = "internal_auth_session=eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJhZG1pbiJ9.AAAA"
    assert svc.call("GET", "/", headers={"cookie": forged})[0] == 302
    session, _ = svc.login()
    status, headers, body = svc.call("GET", "/", headers={"cookie": session})
    assert status == 200 and b"/static/app.js" in body
    assert "script-src 'self'" in dict(headers)["Content-Security-Policy"]
    assert svc.call("GET", "/login")[0] == 200
    assert svc.call("GET", "/static/app.js")[0] == 200
    assert svc.call("GET", "/static/../handler.py")[0] == 404
    assert svc.call("GET", "/nope")[0] == 404
    assert svc.call("POST", "/")[0] == 405


def test_api_with_forged_cookie_is_401(svc: Svc) -> None:
    assert svc.call("GET", "/api/v1/repositories", headers={"cookie": "internal_auth_session=x.y.z"})[0] == 401


def test_csrf_cookie_session_needs_the_header(svc: Svc) -> None:
    session, token = svc.login()
    cookies = f"{session}; lakemount_csrf={token}"
    body = json.dumps({"name": "cc1", "storage_namespace": f"local://{svc.app.config.home}/data/ns/cc1"}).encode()
    ct = {"content-type": "application/json"}
    # No header, a wrong one, or a header without the cookie: refused, nothing created.
    assert svc.call("POST", "/api/v1/repositories", body=body, headers={**ct, "cookie": cookies})[0] == 403
    assert svc.call("POST", "/api/v1/repositories", body=body, headers={**ct, "cookie": cookies, "x-lakemount-csrf": "nope"})[0] == 403
    assert svc.call("POST", "/api/v1/repositories", body=body, headers={**ct, "cookie": session, "x-lakemount-csrf": token})[0] == 403
    assert svc.call("GET", "/api/v1/repositories/cc1", headers={"cookie": session})[0] == 404
    # Reads need no header; the matching header lets the change through.
    assert svc.call("GET", "/api/v1/repositories", headers={"cookie": session})[0] == 200
    assert svc.call("POST", "/api/v1/repositories", body=body, headers={**ct, "cookie": cookies, "x-lakemount-csrf": token})[0] == 201
    assert svc.call("DELETE", "/api/v1/repositories/cc1", headers={"cookie": cookies})[0] == 403
    assert svc.call("DELETE", "/api/v1/repositories/cc1", headers={"cookie": cookies, "x-lakemount-csrf": token})[0] == 204


def test_csrf_does_not_touch_basic_auth(svc: Svc) -> None:
    body = json.dumps({"name": "cc2", "storage_namespace": f"local://{svc.app.config.home}/data/ns/cc2"}).encode()
    # Basic auth (the SDKs), even with a stray session cookie in the request: no CSRF header needed.
    session, _ = svc.login()
    assert svc.call("POST", "/api/v1/repositories", body=body,
                    headers={"content-type": "application/json", "authorization": BASIC, "cookie": session})[0] == 201
    assert svc.call("DELETE", "/api/v1/repositories/cc2", headers={"authorization": BASIC})[0] == 204


def test_logout_clears_both_cookies(svc: Svc) -> None:
    status, headers, _ = svc.call("POST", "/api/v1/auth/logout")
    cookies = [v for k, v in headers if k.lower() == "set-cookie"]
    assert status == 204 and any(c.startswith("internal_auth_session=;") for c in cookies)
    assert any(c.startswith("lakemount_csrf=;") and "Max-Age=0" in c for c in cookies)


def _preview(svc: Svc, path: str, rows: int | None = None) -> dict[str, Any]:
    from urllib.parse import quote

    q = f"path={quote(path, safe='')}" + (f"&rows={rows}" if rows else "")
    status, _, body = svc.call("GET", "/api/v1/repositories/rui/refs/main/objects/preview", q, headers={"authorization": BASIC})
    assert status == 200, body
    return json.loads(body)  # type: ignore[no-any-return]


def test_previews(svc: Svc) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    from lakemount.api.operations.preview import TEXT_CAP

    cat = svc.app.catalog
    buf = io.BytesIO()
    pq.write_table(pa.table({"id": list(range(1000)), "name": [f"<b>n{i}</b>" for i in range(1000)]}), buf, row_group_size=100)
    cat.put("rui", "main", "t.parquet", buf.getvalue())
    cat.put("rui", "main", XSS, b"a,b\n<script>alert(1)</script>,2\n")
    cat.put("rui", "main", "d.json", b'{"k": [1, 2]}')
    cat.put("rui", "main", "bin.dat", bytes(range(256)) * 10)
    cat.put("rui", "main", "big.txt", b"x" * (TEXT_CAP * 3))
    cat.put("rui", "main", "bad.parquet", b"not parquet at all")
    cat.put("rui", "main", "p.png", b"\x89PNG\r\n\x1a\n")

    p = _preview(svc, "t.parquet", rows=5)
    assert p["kind"] == "parquet" and [c["name"] for c in p["schema"]] == ["id", "name"]
    assert p["schema"][0]["type"] == "int64" and p["rows"] == [[i, f"<b>n{i}</b>"] for i in range(5)]
    assert p["num_rows"] == 1000 and p["truncated"]
    c = _preview(svc, XSS)
    assert c["kind"] == "csv" and c["schema"][0]["name"] == "a" and c["rows"] == [["<script>alert(1)</script>", "2"]]
    assert c["path"] == XSS  # data, returned as JSON; the page inserts it as text
    assert json.loads(_preview(svc, "d.json")["text"]) == {"k": [1, 2]}
    assert _preview(svc, "bin.dat")["kind"] == "binary"
    big = _preview(svc, "big.txt")
    assert big["kind"] == "text" and big["truncated"] and len(big["text"]) == TEXT_CAP
    assert _preview(svc, "bad.parquet")["kind"] == "error"
    assert _preview(svc, "p.png")["kind"] == "image"


def test_preview_errors_are_api_errors(svc: Svc) -> None:
    assert svc.call("GET", "/api/v1/repositories/rui/refs/main/objects/preview", "path=missing",
                    headers={"authorization": BASIC})[0] == 404
    assert svc.call("GET", "/api/v1/repositories/rui/refs/main/objects/preview", "path=",
                    headers={"authorization": BASIC})[0] == 400
    assert svc.call("GET", "/api/v1/repositories/rui/refs/main/objects/preview", "path=x")[0] == 401


STATIC = Path(__file__).resolve().parents[2] / "lakemount" / "ui" / "static"


def test_the_page_never_uses_html_sinks() -> None:
    """The UI's modules build the DOM from text nodes and attributes only (core.js's el()): no innerHTML, outerHTML,
    insertAdjacentHTML, document.write or eval in any of them, so nothing from the API can become markup or script."""
    from lakemount.ui.pages import asset

    modules = sorted(p.name for p in STATIC.glob("*.js"))
    assert len(modules) > 10
    for name in modules:
        js = asset(name)
        assert js is not None, name
        for sink in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function"):
            assert sink not in js.decode(), (name, sink)
    assert re.search(r"createTextNode", (asset("core.js") or b"").decode())


IMPORT = re.compile(r'^import \{([^}]*)\} from "\./([\w]+\.js)";', re.M)
EXPORT = re.compile(r"^export (?:async function|function|const|let) ([A-Za-z_$][\w$]*)", re.M)


def test_the_ui_is_es_modules_that_import_what_they_share() -> None:
    """index.html loads one module (app.js, no build step); each module imports what it uses of another by name
    (no globals shared between classic scripts), from a module beside it that exports that name, and every module
    is reached from app.js."""
    html = (STATIC / "index.html").read_text()
    assert re.findall(r"<script[^>]*>", html) == ['<script type="module" src="/static/app.js">']
    exports = {p.name: set(EXPORT.findall(p.read_text())) for p in STATIC.glob("*.js")}
    graph: dict[str, set[str]] = {}
    for name in exports:
        text = (STATIC / name).read_text()
        assert '"use strict"' not in text, name  # a module is strict already
        graph[name] = set()
        for names, source in IMPORT.findall(text):
            assert source in exports, f"{name} imports from {source}, which is not a module beside it"
            wanted = {n.strip() for n in names.split(",") if n.strip()}
            assert wanted <= exports[source], f"{name} imports {sorted(wanted - exports[source])} that {source} does not export"
            graph[name].add(source)
    reached, todo = set(), ["app.js"]
    while todo:
        m = todo.pop()
        if m not in reached:
            reached.add(m)
            todo.extend(graph[m])
    assert reached == set(exports), f"modules app.js never loads: {sorted(set(exports) - reached)}"


def test_listing_pages_by_after(svc: Svc) -> None:
    """The browser's paging: amount=100 per page, next_offset feeds the next page's after, no entry twice or lost."""
    cat = svc.app.catalog
    cat.create_repository("big")
    for i in range(250):
        cat.put("big", "main", f"dir/{i:05d}", b"")
    seen: list[str] = []
    after = ""
    pages = 0
    while True:
        status, _, body = svc.call("GET", "/api/v1/repositories/big/refs/main/objects/ls",
                                   f"prefix=dir/&delimiter=/&amount=100&after={after}", headers={"authorization": BASIC})
        assert status == 200
        page = json.loads(body)
        assert len(page["results"]) <= 100
        seen += [o["path"] for o in page["results"]]
        pages += 1
        if not page["pagination"]["has_more"]:
            break
        after = page["pagination"]["next_offset"]
    assert pages == 3 and seen == [f"dir/{i:05d}" for i in range(250)]


def test_text_preview_cut_inside_a_character_drops_it(svc: Svc) -> None:
    """A text longer than the cap, cut in the middle of a multi-byte character: the partial character is left
    out, not shown as U+FFFD."""
    from lakemount.api.operations.preview import TEXT_CAP

    cat = svc.app.catalog
    cat.put("rui", "main", "cjk.txt", "日".encode() * (TEXT_CAP // 3 + 10))  # TEXT_CAP is not a multiple of 3
    p = _preview(svc, "cjk.txt")
    assert p["kind"] == "text" and p["truncated"]
    assert "\ufffd" not in p["text"] and set(p["text"]) == {"日"} and len(p["text"]) == TEXT_CAP // 3


def test_serve_on_a_home_without_users_says_how_to_get_a_key(tmp_path: Path) -> None:
    """Only ``up`` creates the first user: ``serve`` on a fresh home printed its web UI address and nothing a new
    user could log in with. It says so (on stderr: stdout's first lines stay the addresses scripts read)."""
    import os
    import signal
    import subprocess
    import time

    from lakemount.cli.serve import NO_USER_HINT
    from tests.gateway.server_fixture import lakemount_cmd

    env = {k: v for k, v in os.environ.items() if not k.startswith("LAKEMOUNT_")}
    env["LAKEMOUNT_HOME"] = str(tmp_path / "home")
    err = tmp_path / "serve.err"
    with open(err, "w") as errf:
        proc = subprocess.Popen(lakemount_cmd("serve", "--listen", "127.0.0.1:0", "--workers", "1"), env=env,
                                stdout=subprocess.PIPE, stderr=errf, text=True, start_new_session=True)
    try:
        assert proc.stdout is not None
        assert "listening on" in proc.stdout.readline() and "web UI" in proc.stdout.readline()
        deadline = time.monotonic() + 20
        while NO_USER_HINT not in err.read_text() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert NO_USER_HINT in err.read_text()
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def test_object_data_cannot_run_script_in_the_ui_origin(svc: Svc) -> None:
    """The UI's download link and image preview point at getObject on the UI's own origin: an object stored as
    text/html must come back sandboxed (no script, no origin) and never sniffed, or opening it would act with the
    user's session. HEAD answers the same headers."""
    from lakemount.api.context import UNTRUSTED_CSP as OBJECT_CSP

    svc.app.catalog.put("rui", "main", "evil.html", b"<script>fetch('/api/v1/auth/users')</script>", content_type="text/html")
    for method in ("GET", "HEAD"):
        status, headers, _ = svc.call(method, "/api/v1/repositories/rui/refs/main/objects", "path=evil.html",
                                      headers={"authorization": BASIC})
        h = dict(headers)
        assert status == 200 and h["Content-Type"] == "text/html"
        assert h["Content-Security-Policy"] == OBJECT_CSP and OBJECT_CSP.startswith("sandbox;") and "script-src" not in OBJECT_CSP
        assert h["X-Content-Type-Options"] == "nosniff"
