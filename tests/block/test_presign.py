"""Presigned URLs at the block level: S3 (moto) hands them out, every other backend answers None, wrappers delegate."""

from __future__ import annotations

import time
import urllib.error
import urllib.request
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from lakemount.block import adapter_from_config, s3_options
from lakemount.block.flaky import FlakyAdapter
from lakemount.block.local import LocalAdapter
from lakemount.block.memory import MemoryAdapter
from lakemount.block.router import presign
from lakemount.block.trash import TrashFallbackAdapter
from lakemount.errors import InvalidArgument


def _http(method: str, url: str, data: bytes | None = None, headers: dict[str, str] | None = None) -> tuple[int, bytes]:
    # An explicit type: urllib would send a form type, whose body moto parses away.
    all_headers = {"Content-Type": "application/octet-stream", **(headers or {})} if data is not None else headers or {}
    req = urllib.request.Request(url, data=data, method=method, headers=all_headers)
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def test_s3_presigned_put_then_get_with_range(s3_adapter: Any, s3_bucket: str) -> None:
    url = f"s3://{s3_bucket}/presign/{uuid.uuid4().hex}"
    before = time.time()
    put = s3_adapter.presign(url, "PUT")
    assert put is not None
    put_url, expires = put
    assert "X-Amz-Signature=" in put_url and "X-Amz-Expires=900" in put_url  # SigV4, the default expiry
    assert before + 899 <= expires <= time.time() + 901
    assert _http("PUT", put_url, b"presigned bytes")[0] == 200
    assert s3_adapter.get(url) == b"presigned bytes"
    get = s3_adapter.presign(url, "GET")
    assert get is not None
    assert _http("GET", get[0]) == (200, b"presigned bytes")
    assert _http("GET", get[0], headers={"Range": "bytes=10-14"}) == (206, b"bytes")
    with pytest.raises(InvalidArgument):
        s3_adapter.presign(url, "DELETE")
    with pytest.raises(InvalidArgument):
        s3_adapter.presign(f"s3://{s3_bucket}", "GET")


def test_s3_presign_disabled_or_bad_expiry(s3_options: dict[str, Any]) -> None:
    from lakemount.block.s3 import S3Adapter

    off = S3Adapter(**s3_options, presign=False)
    assert off.presign("s3://b/k", "GET") is None
    short = S3Adapter(**s3_options, presign_expiry=60)
    signed = short.presign("s3://b/k", "GET")
    assert signed is not None and "X-Amz-Expires=60" in signed[0]
    for bad in (0, 7 * 24 * 3600 + 1):
        with pytest.raises(InvalidArgument, match="pre_signed_expiry"):
            S3Adapter(**s3_options, presign_expiry=bad)


def test_other_backends_do_not_presign_and_wrappers_delegate(tmp_path: Path, s3_adapter: Any, s3_bucket: str) -> None:
    local_url = LocalAdapter.url_of(str(tmp_path / "k"))
    assert LocalAdapter().presign(local_url, "GET") is None
    assert MemoryAdapter().presign("mem://m/k", "PUT") is None
    router = adapter_from_config({"type": "local"})
    router.register("s3", s3_adapter)
    wrapped = TrashFallbackAdapter(FlakyAdapter(router))
    assert presign(wrapped, local_url, "GET") is None
    assert presign(wrapped, "mem://m/k", "GET") is None
    signed = presign(wrapped, f"s3://{s3_bucket}/k", "GET")
    assert signed is not None and signed[0].startswith("http")
    assert presign(object(), "s3://b/k", "GET") is None  # an adapter without the capability


def test_config_keys_reach_the_adapter() -> None:
    assert s3_options({"disable_pre_signed": True, "pre_signed_expiry": 120}) == {"presign": False, "presign_expiry": 120}
    # As environment variables give them: strings.
    assert s3_options({"disable_pre_signed": "false", "pre_signed_expiry": "30"}) == {"presign": True, "presign_expiry": 30}
    with pytest.raises(InvalidArgument, match="disable_pre_signed"):
        s3_options({"disable_pre_signed": "maybe"})
    with pytest.raises(InvalidArgument, match="pre_signed_expiry"):
        s3_options({"pre_signed_expiry": "soon"})


def test_s3_presigned_urls_verify_as_sigv4_for_their_method_and_time_only() -> None:
    """moto does not check signatures: lakemount's own SigV4 verifier (the gateway's) does, as S3 would."""
    from urllib.parse import urlsplit

    from lakemount.block.s3 import S3Adapter
    from lakemount.gateway.errors import S3Error
    from lakemount.gateway.sig.auth import authenticate
    from lakemount.gateway.sig.request import HttpRequest
    from tests.gateway.helpers import AKID, ENDPOINT, SECRET, lookup

    adapter = S3Adapter(endpoint_url=ENDPOINT, region="us-east-1", access_key_id=AKID, secret_access_key=SECRET,
                        presign_expiry=60)

    def request(signed: str, method: str) -> HttpRequest:
        split = urlsplit(signed)
        return HttpRequest(method, split.path, split.query, (("Host", split.netloc),))

    get = adapter.presign("s3://bucket/dir/a b", "GET")
    put = adapter.presign("s3://bucket/dir/a b", "PUT")
    assert get is not None and put is not None
    authenticate(request(get[0], "GET"), lookup)
    authenticate(request(put[0], "PUT"), lookup)
    with pytest.raises(S3Error, match="signature"):
        authenticate(request(get[0], "PUT"), lookup)
    with pytest.raises(S3Error, match="expired"):
        authenticate(request(get[0], "GET"), lookup, now=datetime.now(UTC) + timedelta(seconds=120))
