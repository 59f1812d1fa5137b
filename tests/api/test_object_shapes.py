"""One honest shape for symlinks and directory markers in the REST API (issue 23 item 5).

The mount stores a symlink with its target's length as its size and no data;
every front end shows it, and a directory marker, as an object of 0 bytes with
the empty checksum, a content type that says what it is, no physical address,
and (a symlink) its target in the metadata.  Errors never show the server's
storage paths.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from lakemount.catalog.model import (
    DIR_MODE,
    DIRECTORY_CONTENT_TYPE,
    EMPTY_ETAG,
    LINK_MODE,
    SYMLINK_CONTENT_TYPE,
    SYMLINK_TARGET_KEY,
    Entry,
)
from tests.ui.test_units import BASIC, Svc

AUTH = {"authorization": BASIC}
TARGET = "../data/real.csv"  # 15 bytes: what the mount records as the link's size


@pytest.fixture
def svc(tmp_path: Path) -> Svc:
    s = Svc(tmp_path / "home")
    cat = s.app.catalog
    cat.create_repository("shp")
    cat.put("shp", "main", "data/real.csv", b"a,b\n1,2\n")
    # What `ln -s ../data/real.csv links/l` and `mkdir empty` in the mount stage.
    cat.put_entry("shp", "main", "links/l", Entry("", len(TARGET), "", time.time_ns(), "", (), LINK_MODE, 0, 0, TARGET))
    cat.put_entry("shp", "main", "empty/", Entry("", 0, "", time.time_ns(), "", (), DIR_MODE))
    return s


def get(svc: Svc, path: str, query: str) -> tuple[int, dict[str, str], bytes]:
    status, headers, body = svc.call("GET", path, query, headers=AUTH)
    return status, {k.lower(): v for k, v in headers}, body


OBJ = "/api/v1/repositories/shp/refs/main/objects"


@pytest.mark.parametrize(("path", "content_type", "meta"), [
    ("links/l", SYMLINK_CONTENT_TYPE, {SYMLINK_TARGET_KEY: TARGET}),
    ("empty/", DIRECTORY_CONTENT_TYPE, {}),
])
def test_item5_symlinks_and_markers_have_one_shape_in_the_api(svc: Svc, path: str, content_type: str, meta: dict[str, str]) -> None:
    status, _, body = get(svc, OBJ + "/stat", f"path={path}")
    assert status == 200
    st = json.loads(body)
    assert (st["size_bytes"], st["checksum"], st["physical_address"], st["content_type"], st["metadata"]) == (
        0, EMPTY_ETAG, "", content_type, meta)
    status, headers, body = get(svc, OBJ, f"path={path}")
    assert status == 200 and body == b""
    assert headers["etag"] == f'"{EMPTY_ETAG}"' and headers["content-type"] == content_type
    assert all(headers.get("x-lakefs-meta-" + k) == v for k, v in meta.items())
    status, headers, _ = svc.call("HEAD", OBJ, f"path={path}", headers=AUTH)
    assert status == 200 and dict((k.lower(), v) for k, v in headers)["content-length"] == "0"
    status, _, body = get(svc, OBJ + "/ls", "prefix=" + path.split("/")[0])
    listed = [r for r in json.loads(body)["results"] if r["path"] == path]
    assert [(r["size_bytes"], r["checksum"], r["physical_address"], r["content_type"]) for r in listed] == [
        (0, EMPTY_ETAG, "", content_type)]
    status, _, body = get(svc, OBJ + "/preview", f"path={path}")
    assert status == 200, body
    assert json.loads(body)["size_bytes"] == 0 and str(svc.app.config.home) not in body.decode()
    diff = json.loads(get(svc, "/api/v1/repositories/shp/branches/main/diff", "")[2])
    assert [d["size_bytes"] for d in diff["results"] if d["path"] == path] == [0]


def test_item5_a_missing_data_object_is_told_without_the_servers_path(svc: Svc) -> None:
    cat = svc.app.catalog
    entry = cat.stat("shp", "main", "data/real.csv")
    url = cat.physical_url(cat.repository("shp"), entry.address)
    os.remove(url.removeprefix("local://"))
    for query in ("path=data/real.csv", ):
        for endpoint in (OBJ, OBJ + "/preview"):
            status, _, body = get(svc, endpoint, query)
            assert status in (404, 503), body
            message = json.loads(body)["message"]
            assert len(message.splitlines()) == 1
            assert str(svc.app.config.home) not in message and "/data/" not in message.replace("data/real.csv", ""), message
