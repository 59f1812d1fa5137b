"""S3Adapter behaviour beyond the conformance suite: error translation and the streaming reader."""

from __future__ import annotations

import socket
from typing import Any

import pytest

from lakemount.block.s3 import S3Adapter
from lakemount.errors import Conflict, InvalidArgument, ObjectNotFound, Unavailable
from lakemount.graveler.ports import BlockAdapter


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_unreachable_endpoint_is_unavailable() -> None:
    adapter = S3Adapter(
        endpoint_url=f"http://127.0.0.1:{_closed_port()}",
        access_key_id="x",
        secret_access_key="y",
        region="us-east-1",
        connect_timeout=0.5,
        max_attempts=1,
    )
    with pytest.raises(Unavailable):
        adapter.get("s3://bucket/key")
    with pytest.raises(Unavailable):
        adapter.put("s3://bucket/key", b"x")
    with pytest.raises(Unavailable):
        list(adapter.list("s3://bucket/"))


def test_missing_bucket_is_not_found(s3_options: dict[str, Any]) -> None:
    adapter = S3Adapter(**s3_options)
    with pytest.raises(ObjectNotFound):
        adapter.get("s3://no-such-bucket-here/key")
    assert not adapter.exists("s3://no-such-bucket-here/key")
    adapter.delete("s3://no-such-bucket-here/key")


@pytest.mark.parametrize("url", ["s3://", "s3:///key", "s3://bucket", "s3://bucket/"])
def test_object_urls_need_bucket_and_key(s3_adapter: BlockAdapter, url: str) -> None:
    with pytest.raises(InvalidArgument):
        s3_adapter.get(url)


def test_list_whole_bucket_without_trailing_slash(s3_adapter: BlockAdapter, s3_bucket: str) -> None:
    s3_adapter.put(f"s3://{s3_bucket}/zz-listing/one", b"1")
    urls = [i.url for i in s3_adapter.list(f"s3://{s3_bucket}")]
    assert f"s3://{s3_bucket}/zz-listing/one" in urls
    assert urls == sorted(urls)


def test_reader_fails_if_object_is_replaced(s3_adapter: BlockAdapter, s3_bucket: str) -> None:
    url = f"s3://{s3_bucket}/replaced-while-reading"
    s3_adapter.put(url, b"a" * (3 << 20))
    with s3_adapter.open(url) as f:
        assert f.read(10) == b"a" * 10
        s3_adapter.put(url, b"b" * (3 << 20))
        f.seek(2 << 20)  # forces a new GET, which must not mix in the new version
        with pytest.raises(Conflict):
            f.read(10)


def test_list_pages(s3_options: dict[str, Any], s3_bucket: str) -> None:
    # Several ListObjectsV2 pages must come back whole and in order.
    adapter = S3Adapter(**s3_options, list_page_size=7)
    base = f"s3://{s3_bucket}/paged/"
    for i in range(30):
        adapter.put(f"{base}{i:03d}", b"")
    assert [i.url for i in adapter.list(base)] == [f"{base}{i:03d}" for i in range(30)]
