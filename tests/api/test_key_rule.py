"""The catalog's key rule in the REST API (issue 23 item 4).

Every write refuses a path that is not UTF-8 text with a one-line 400; a key
stored before the rule (planted below the catalog) lists, diffs and shows in
valid UTF-8 JSON, printable (``\\xNN``), never as a lone ``\\udcXX`` escape.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from lakemount.catalog.catalog import encode_path
from lakemount.catalog.model import FILE_MODE, Entry
from tests.ui.test_units import BASIC, Svc

AUTH = {"authorization": BASIC}
BAD = "dir/bad\udcffname.txt"


@pytest.fixture
def svc(tmp_path: Path) -> Svc:
    s = Svc(tmp_path / "home")
    s.app.catalog.create_repository("kru")
    return s


def _json(svc: Svc, method: str, path: str, query: str = "", body: bytes = b"", status: int = 200) -> object:
    got, _, data = svc.call(method, path, query, body, {**AUTH, "content-type": "application/json"})
    assert got == status, data
    return json.loads(data.decode("utf-8"))  # strict UTF-8 first


def test_item4_api_writes_refuse_paths_that_are_not_utf8(svc: Svc) -> None:
    base = "/api/v1/repositories/kru/branches/main/objects"
    got, _, data = svc.call("POST", base, "path=dir%2Fbad%FFname.txt", b"x", {**AUTH, "content-type": "application/octet-stream"})
    assert got == 400 and len(json.loads(data)["message"].splitlines()) == 1
    # Below every front end, the catalog itself refuses to stage such a key (the one rule).
    from lakemount.errors import InvalidArgument

    cat = svc.app.catalog
    ok = cat.put("kru", "main", "ok.txt", b"ok")
    for write in (lambda: cat.put_entry("kru", "main", BAD, ok), lambda: cat.apply("kru", "main", [(BAD, ok)]),
                  lambda: cat.put("kru", "main", BAD, b"x"),
                  lambda: cat.stage_records("kru", "main", [(encode_path(BAD), ok.value())])):
        with pytest.raises(InvalidArgument, match="not UTF-8 text") as info:
            write()
        assert "\\xff" in str(info.value) and len(str(info.value).splitlines()) == 1
    assert [p.path for p in cat.list("kru", "main")] == ["ok.txt"]


def test_item4_an_old_bad_key_lists_in_valid_json(svc: Svc) -> None:
    cat = svc.app.catalog
    cat.put("kru", "main", "dir/good.txt", b"g")
    info = cat.write_data("kru", b"old")
    cat.graveler.set("kru", "main", encode_path(BAD), Entry(info.address, 3, info.etag, time.time_ns(), "", (), FILE_MODE).value())
    shown = "dir/bad\\xffname.txt"
    listed = _json(svc, "GET", "/api/v1/repositories/kru/refs/main/objects/ls", "prefix=dir/")
    assert isinstance(listed, dict) and [r["path"] for r in listed["results"]] == [shown, "dir/good.txt"]
    diff = _json(svc, "GET", "/api/v1/repositories/kru/branches/main/diff")
    assert isinstance(diff, dict) and sorted(r["path"] for r in diff["results"]) == [shown, "dir/good.txt"]
    top = _json(svc, "GET", "/api/v1/repositories/kru/refs/main/objects/ls", "delimiter=/")
    assert isinstance(top, dict) and [r["path"] for r in top["results"]] == ["dir/"]
