"""GETs of hot objects through the S3 gateway and the REST API come from the node's caches, not the object store.

Both front ends run in process over an S3 block store (moto), with a counting
adapter under the catalog: a repeated GET, whole or ranged, of a staged or a
committed object must make no request to the store at all, and return the
same bytes and headers.
"""

from __future__ import annotations

import base64
import hashlib
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from lakemount.api.handler import ApiService
from lakemount.app import App
from lakemount.block.flaky import OPERATIONS, FlakyAdapter
from lakemount.catalog.blocks import BLOCK_SIZE
from lakemount.catalog.model import upload_entry
from lakemount.config import load
from lakemount.gateway.handler import S3Gateway
from lakemount.gateway.settings import from_config
from lakemount.serving.http import BytesBody, Request, Response
from tests.gateway.server_fixture import ADMIN_KEY, ADMIN_SECRET, signed_headers
from tests.gateway.test_hot_get import statements
from tests.moto_server import moto_s3

BUCKET = "cached-reads"
SMALL = 4096
LARGE = 2 * BLOCK_SIZE + 4099  # streamed (above one block): three blocks


@pytest.fixture(scope="module")
def endpoint() -> Iterator[str]:
    with moto_s3(BUCKET) as url:
        yield url


@pytest.fixture
def app(tmp_path: Path, endpoint: str) -> App:
    env = {
        "LAKEMOUNT_HOME": str(tmp_path),
        "LAKEMOUNT_BLOCKSTORE_TYPE": "s3",
        "LAKEMOUNT_BLOCKSTORE_DEFAULT_NAMESPACE_PREFIX": f"s3://{BUCKET}/{tmp_path.name}",
        "LAKEMOUNT_BLOCKSTORE_S3_ENDPOINT": endpoint,
        "LAKEMOUNT_BLOCKSTORE_S3_REGION": "us-east-1",
        "LAKEMOUNT_BLOCKSTORE_S3_ACCESS_KEY_ID": "testing",
        "LAKEMOUNT_BLOCKSTORE_S3_SECRET_ACCESS_KEY": "testing",
    }
    app = App(load(None, env=env))
    # Every request the catalog makes of the block store is counted (nothing is injected).
    app.__dict__["adapter"] = FlakyAdapter(app.adapter)
    app.auth.create_user("admin")
    app.auth.attach_policy("admin", "Admin")
    app.auth.create_credentials("admin", ADMIN_KEY, ADMIN_SECRET)
    app.catalog.create_repository("repo")
    return app


def store_requests(app: App) -> int:
    adapter = app.adapter
    assert isinstance(adapter, FlakyAdapter)
    return sum(adapter.calls[op] for op in OPERATIONS)


def _data(n: int, seed: bytes) -> bytes:
    block = hashlib.sha256(seed).digest()
    return (block * (n // len(block) + 1))[:n]


def _body(resp: Response) -> bytes:
    body = resp.body if isinstance(resp.body, bytes) else b"".join(bytes(c) for c in resp.body)
    if resp.close is not None:
        resp.close()
    return body


def gateway_get(gw: S3Gateway, key: str, headers: dict[str, str] | None = None) -> Response:
    h = signed_headers("GET", f"http://gw/repo/{key}", dict(headers or {}), hashlib.sha256(b"").hexdigest())
    resp = gw.handle(Request("GET", f"/repo/{key}", "", tuple((k.lower(), v) for k, v in h.items()), BytesBody()))
    resp.body = _body(resp)
    return resp


def api_get(api: ApiService, ref: str, path: str, headers: dict[str, str] | None = None) -> Response:
    auth = ("authorization", "Basic " + base64.b64encode(f"{ADMIN_KEY}:{ADMIN_SECRET}".encode()).decode())
    extra = tuple((k.lower(), v) for k, v in (headers or {}).items())
    resp = api.handle(Request("GET", f"/api/v1/repositories/repo/refs/{ref}/objects", f"path={path}", (auth, *extra), BytesBody()))
    resp.body = _body(resp)
    return resp


def front_ends(app: App) -> dict[str, object]:
    gw = S3Gateway(app, from_config(app.config))
    api = ApiService(app)
    return {
        "gateway": lambda ref, path, headers=None: gateway_get(gw, f"{ref}/{path}", headers),
        "api": lambda ref, path, headers=None: api_get(api, ref, path, headers),
    }


@pytest.mark.parametrize("front_end", ["gateway", "api"])
@pytest.mark.parametrize("committed", [False, True], ids=["staged", "committed"])
def test_a_second_get_asks_the_object_store_nothing(app: App, front_end: str, committed: bool) -> None:
    small, large = _data(SMALL, b"small"), _data(LARGE, b"large")
    app.catalog.put("repo", "main", "small.bin", small)
    app.catalog.put("repo", "main", "large.bin", large)
    if committed:
        app.catalog.commit("repo", "main", "objects", committer="t")
    get = front_ends(app)[front_end]
    for path, data in (("small.bin", small), ("large.bin", large)):
        first = get("main", path)  # type: ignore[operator]
        assert first.status == 200 and first.body == data
        before = store_requests(app)
        again = get("main", path)  # type: ignore[operator]
        assert again.status == 200 and again.body == data
        assert store_requests(app) == before, f"{front_end} asked the object store again for a hot {path}"
        for header in ("ETag", "Last-Modified", "Content-Type", "Content-Length"):
            assert again.header(header) == first.header(header)


@pytest.mark.parametrize("front_end", ["gateway", "api"])
def test_ranges_are_right_from_the_cache(app: App, front_end: str) -> None:
    data = _data(LARGE, b"ranges")
    app.catalog.put("repo", "main", "r.bin", data)
    get = front_ends(app)[front_end]
    ranges = [(0, 0), (5, 4100), (BLOCK_SIZE - 3, BLOCK_SIZE + 2), (2 * BLOCK_SIZE + 5, LARGE - 1), (0, LARGE - 1)]
    for cold in (True, False):
        before = store_requests(app)
        for first, last in ranges:
            resp = get("main", "r.bin", {"Range": f"bytes={first}-{last}"})  # type: ignore[operator]
            assert resp.status == 206 and resp.body == data[first : last + 1], (first, last)
            assert resp.header("Content-Range") == f"bytes {first}-{last}/{LARGE}"
        suffix = get("main", "r.bin", {"Range": "bytes=-10"})  # type: ignore[operator]
        assert suffix.status == 206 and suffix.body == data[-10:]
        if not cold:
            assert store_requests(app) == before, "warm ranges asked the object store"


def test_the_api_and_the_gateway_share_the_cached_blocks(app: App) -> None:
    data = _data(SMALL, b"shared")
    app.catalog.put("repo", "main", "s.bin", data)
    ends = front_ends(app)
    assert ends["gateway"]("main", "s.bin").body == data  # type: ignore[operator]
    before = store_requests(app)
    assert ends["api"]("main", "s.bin").body == data  # type: ignore[operator]
    assert store_requests(app) == before


def test_a_damaged_cache_file_is_refetched_not_served(app: App) -> None:
    data = _data(SMALL, b"damaged")
    app.catalog.put("repo", "main", "d.bin", data)
    get = front_ends(app)["gateway"]
    assert get("main", "d.bin").body == data  # type: ignore[operator]
    disk = app.cache.disk
    assert disk is not None
    files = [os.path.join(d, f) for d, _, fs in os.walk(disk.directory) for f in fs if not f.startswith(".")]
    damaged = 0
    for path in files:
        raw = bytearray(Path(path).read_bytes())
        if raw.endswith(data):  # the object's block (ranges and metaranges are cached here too)
            raw[-1] ^= 0xFF
            Path(path).write_bytes(bytes(raw))
            damaged += 1
    assert damaged == 1
    app.cache.ram.clear()  # as after a restart: only the disk tier holds the block
    before = store_requests(app)
    again = get("main", "d.bin")  # type: ignore[operator]
    assert again.status == 200 and again.body == data
    assert disk.stats()["corrupt"] == 1
    assert store_requests(app) == before + 1, "the damaged block was fetched again"


def test_a_hot_api_get_is_two_statements(app: App) -> None:
    # The repository's record once (it was read three times) and the branch row with the staged entry.
    data = _data(SMALL, b"statements")
    app.catalog.put("repo", "main", "st.bin", data)
    get = front_ends(app)["api"]
    for _ in range(2):
        assert get("main", "st.bin").body == data  # type: ignore[operator]
    with statements() as seen:
        assert get("main", "st.bin").body == data  # type: ignore[operator]
    assert len(seen) == 2, seen


def test_an_object_at_an_address_a_client_uploaded_to_is_not_cached(app: App) -> None:
    # Only content-addressed data (data/<aa>/<sha256>) never changes; a linked address is the client's upload.
    repo = app.catalog.repository("repo")
    address = "_lakefs/links/not-content-addressed"
    app.adapter.put(app.catalog.physical_url(repo, address), b"linked")
    app.catalog.put_entry("repo", "main", "l.bin", upload_entry(address, 6, hashlib.md5(b"linked").hexdigest(), "l.bin", "", ()))
    get = front_ends(app)["gateway"]
    assert get("main", "l.bin").body == b"linked"  # type: ignore[operator]
    before = store_requests(app)
    assert get("main", "l.bin").body == b"linked"  # type: ignore[operator]
    assert store_requests(app) > before
