"""The gateway's core without HTTP: ``S3Gateway.handle`` on in-memory requests, and its pure helpers."""

from __future__ import annotations

import hashlib
import os
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from lakemount.app import App
from lakemount.config import load
from lakemount.errors import InvalidArgument, Unavailable
from lakemount.gateway.buckets import repo_name_for, valid_bucket_name
from lakemount.gateway.errors import S3Error
from lakemount.gateway.handler import S3Gateway, decode_key
from lakemount.gateway.listing import decode_token, encode_token, parse_max
from lakemount.gateway.objects import etag_matches, parse_copy_range, parse_range
from lakemount.gateway.operations import complete_multipart_upload
from lakemount.gateway.settings import from_config, parse_aliases, parse_listen_address
from lakemount.serving.http import BytesBody, Request, Response
from tests.serving.stalled import StalledBody

from .server_fixture import ADMIN_KEY, ADMIN_SECRET, signed_headers

NS = "{http://s3.amazonaws.com/doc/2006-03-01/}"


@pytest.fixture
def gw(tmp_path: Path) -> S3Gateway:
    app = App(load(None, env={"LAKEMOUNT_HOME": str(tmp_path)}))
    app.auth.create_user("admin")
    app.auth.attach_policy("admin", "Admin")
    app.auth.create_credentials("admin", ADMIN_KEY, ADMIN_SECRET)
    return S3Gateway(app, from_config(app.config))


def call(gw: S3Gateway, method: str, target: str, body: bytes = b"", headers: dict[str, str] | None = None) -> Response:
    path, _, query = target.partition("?")
    payload = hashlib.sha256(body).hexdigest()
    h = signed_headers(method, f"http://gw{target}", {"content-length": str(len(body)), **(headers or {})}, payload)
    resp = gw.handle(Request(method, path, query, tuple((k.lower(), v) for k, v in h.items()), BytesBody(body)))
    if not isinstance(resp.body, bytes):
        resp.body = b"".join(resp.body)
    if resp.close is not None:
        resp.close()
    return resp


def test_round_trip_in_process(gw: S3Gateway) -> None:
    assert call(gw, "PUT", "/core").status == 200
    put = call(gw, "PUT", "/core/main/a%20b.txt", b"hello")
    assert put.status == 200 and put.header("ETag") == f'"{hashlib.md5(b"hello").hexdigest()}"'
    got = call(gw, "GET", "/core/main/a%20b.txt")
    assert got.status == 200 and got.body == b"hello" and got.header("x-amz-request-id")
    missing = call(gw, "GET", "/core/main/nope")
    doc = ET.fromstring(missing.body)
    assert missing.status == 404 and doc.findtext("Code") == "NoSuchKey"
    assert doc.findtext("RequestId") == missing.header("x-amz-request-id")
    head = call(gw, "HEAD", "/core/main/nope")
    assert head.status == 404 and head.body == b""


def test_streamed_completion_of_a_large_upload(gw: S3Gateway, monkeypatch: pytest.MonkeyPatch) -> None:
    """Above STREAM_ABOVE the 200 starts at once, with spaces until the result document."""
    monkeypatch.setattr(complete_multipart_upload, "STREAM_ABOVE", 1)
    monkeypatch.setattr(complete_multipart_upload, "KEEPALIVE_SECONDS", 0.001)
    call(gw, "PUT", "/big")
    up = ET.fromstring(call(gw, "POST", "/big/main/obj?uploads=").body).findtext(f"{NS}UploadId")
    parts = [os.urandom(5 * 1024 * 1024), b"tail"]
    etags = []
    for i, data in enumerate(parts, 1):
        etags.append(call(gw, "PUT", f"/big/main/obj?partNumber={i}&uploadId={up}", data).header("ETag"))
    body = "".join(f"<Part><PartNumber>{i}</PartNumber><ETag>{e}</ETag></Part>" for i, e in enumerate(etags, 1))
    done = call(gw, "POST", f"/big/main/obj?uploadId={up}", f"<CompleteMultipartUpload>{body}</CompleteMultipartUpload>".encode())
    assert done.status == 200 and done.header("Content-Length") is None
    result = ET.fromstring(done.body.strip())
    assert result.tag == f"{NS}CompleteMultipartUploadResult" and result.findtext(f"{NS}ETag", "").endswith('-2"')
    assert call(gw, "GET", "/big/main/obj").body == b"".join(parts)


def test_a_stalled_upload_is_s3s_request_timeout_and_stages_nothing(gw: S3Gateway) -> None:
    assert call(gw, "PUT", "/core").status == 200
    h = signed_headers("PUT", "http://gw/core/main/slow", {"content-length": "4096"}, "UNSIGNED-PAYLOAD")
    resp = gw.handle(Request("PUT", "/core/main/slow", "", tuple((k.lower(), v) for k, v in h.items()), StalledBody()))
    assert resp.status == 400 and ET.fromstring(resp.body).findtext("Code") == "RequestTimeout"
    assert call(gw, "HEAD", "/core/main/slow").status == 404


def test_times_are_the_whole_second_at_or_after_the_write(gw: S3Gateway) -> None:
    # Truncated, an object written at 12.7 s showed 12 s: older than the local file it was
    # uploaded from, so `aws s3 sync` uploaded it again on every run (a CI flake of
    # test_clients_awscli.py). Rounded up, listing, HEAD, copy and conditions all say 13 s.
    assert call(gw, "PUT", "/core").status == 200
    assert call(gw, "PUT", "/core/main/t", b"x").status == 200
    cat = gw.app.catalog
    written = 1_700_000_012_700_000_000
    cat.put_entry("core", "main", "t", cat.stat("core", "main", "t")._replace(mtime_ns=written))
    shown = "Tue, 14 Nov 2023 22:13:33 GMT"  # 1_700_000_013
    assert call(gw, "HEAD", "/core/main/t").header("Last-Modified") == shown
    listed = ET.fromstring(call(gw, "GET", "/core?list-type=2&prefix=main/").body)
    assert listed.findtext(f"{NS}Contents/{NS}LastModified") == "2023-11-14T22:13:33.000Z"
    assert call(gw, "GET", "/core/main/t", headers={"if-modified-since": shown}).status == 304
    assert call(gw, "GET", "/core/main/t", headers={"if-modified-since": "Tue, 14 Nov 2023 22:13:32 GMT"}).status == 200


def test_repository_root_listing_orders_branches_as_keys(gw: S3Gateway) -> None:
    call(gw, "PUT", "/order")
    call(gw, "PUT", "/order/main/x", b"1")
    g = gw.app.graveler
    g.commit("order", "main", "x")
    for b in ("a", "a-b", "a_c"):
        g.create_branch("order", b, "main")
    doc = ET.fromstring(call(gw, "GET", "/order?list-type=2").body)
    keys = [e.text for e in doc.iter(f"{NS}Key")]
    assert keys == sorted(keys) == ["a-b/x", "a/x", "a_c/x", "main/x"]
    doc = ET.fromstring(call(gw, "GET", "/order?list-type=2&delimiter=-").body)
    assert [e.text for e in doc.iter(f"{NS}Prefix") if e.text] == ["a-"]
    assert [e.text for e in doc.iter(f"{NS}Key")] == ["a/x", "a_c/x", "main/x"]


def test_ranges() -> None:
    assert parse_range(None, 10) is None
    assert parse_range("bytes=0-4", 10) == (0, 5)
    assert parse_range("bytes=5-", 10) == (5, 5)
    assert parse_range("bytes=-3", 10) == (7, 3)
    assert parse_range("bytes=8-100", 10) == (8, 2)
    assert parse_range("bytes=4-2", 10) is None
    assert parse_range("lines=1-2", 10) is None
    assert parse_range("bytes=0-1,3-4", 10) is None
    for bad in ("bytes=10-", "bytes=10-20", "bytes=-0"):
        with pytest.raises(S3Error) as e:
            parse_range(bad, 10)
        assert e.value.code == "InvalidRange"
    with pytest.raises(S3Error) as e:
        parse_range("bytes=0-0", 0)
    assert e.value.code == "InvalidRange"
    assert parse_copy_range("bytes=1-3", 10) == (1, 3)
    for bad, code in (("bytes=0-10", "InvalidRange"), ("0-2", "InvalidArgument"), ("bytes=0-", "InvalidArgument")):
        with pytest.raises(S3Error) as e:
            parse_copy_range(bad, 10)
        assert e.value.code == code


def test_small_helpers() -> None:
    assert etag_matches('"abc"', "abc") and etag_matches('"x", "abc"', "abc") and etag_matches("*", "q")
    assert not etag_matches('"abd"', "abc")
    assert decode_key("a%20b/%E2%9C%93") == "a b/✓" and decode_key("plus+sign") == "plus+sign"
    for bad in ("%FF", "%C2%8A"):
        with pytest.raises(S3Error) as e:
            decode_key(bad)
        assert e.value.code == "InvalidURI"
    assert decode_token(encode_token("main/ü/x")) == "main/ü/x"
    assert parse_max(None) == 1000 and parse_max("5") == 5 and parse_max("5000") == 1000
    with pytest.raises(S3Error):
        parse_max("x")
    assert valid_bucket_name("my.bucket-1") and not valid_bucket_name("a") and not valid_bucket_name("Upper")
    assert not valid_bucket_name("192.168.1.1") and not valid_bucket_name("a..b")
    assert repo_name_for("plain-name") == "plain-name"
    derived = repo_name_for("with.dots")
    assert derived.startswith("with-dots-") and derived == repo_name_for("with.dots")


def test_settings() -> None:
    assert parse_listen_address("0.0.0.0:9000") == ("0.0.0.0", 9000)
    assert parse_listen_address("[::1]:80") == ("::1", 80)
    with pytest.raises(InvalidArgument):
        parse_listen_address("nonsense")
    assert parse_aliases({"b": "repo/main"})["b"].ref == "main"
    assert parse_aliases("x=r/dev,y=s/main")["y"].repo == "s"
    with pytest.raises(InvalidArgument):
        parse_aliases({"b": "no-ref"})
    cfg = load(None, env={"LAKEMOUNT_HOME": "/nonexistent", "LAKEMOUNT_GATEWAYS_S3_FLAT": "true"})
    s = from_config(cfg, workers=3, domain_name="s3.example.com, s3.local")
    assert s.flat and s.workers == 3 and s.domain_names == ("s3.example.com", "s3.local")
    with pytest.raises(InvalidArgument):
        from_config(cfg, tls_cert_file="/x.pem")


def test_unavailable_store_detail_stays_in_the_log(gw: S3Gateway, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    """A database outage answers S3's generic 503; the driver's text (host, user) goes to the log only.

    The request is anonymous: anyone can provoke it, so nothing of the detail may reach the body.
    """
    secret = "could not connect to server: host=db.internal.example user=lakemount_admin password=hunter2"

    def down(bucket: str, *, read: bool = False) -> object:
        raise Unavailable(secret)

    monkeypatch.setattr(gw.services.buckets, "resolve", down)
    with caplog.at_level("WARNING", logger="lakemount.gateway"):
        resp = gw.handle(Request("GET", "/anybucket", "", (("host", "gw"),), BytesBody(b"")))
    doc = ET.fromstring(resp.body)
    assert resp.status == 503 and doc.findtext("Code") == "ServiceUnavailable"
    assert doc.findtext("Message") == "Service is unable to handle request."
    for word in ("db.internal", "lakemount_admin", "hunter2", "connect"):
        assert word.encode() not in resp.body
    assert secret in caplog.text
