"""The catalog's key rule through a real gateway (issue 23 item 4).

A key that is not UTF-8 text is refused with a one-line 400 by every write
(``InvalidURI``, as S3 answers a request path that is not UTF-8); a key stored
before the rule (planted below the catalog, as an older mount wrote it) keeps
every listing valid UTF-8 XML, shown printable (``\\xNN``), or exact with
``encoding-type=url``.
"""

from __future__ import annotations

import urllib.error
import urllib.request
import xml.etree.ElementTree as ET
from typing import Any

import pytest
from botocore.exceptions import ClientError

from .server_fixture import Gateway, code, signed_headers

NS = "{http://s3.amazonaws.com/doc/2006-03-01/}"
BAD = b"bad\xffname.txt".decode("utf-8", "surrogateescape")


def plant(gw: Gateway, bucket: str, path: str) -> None:
    from lakemount.catalog.catalog import encode_path
    from lakemount.catalog.model import FILE_MODE, Entry

    cat = gw.app().catalog
    info = cat.write_data(bucket, b"old")
    cat.graveler.set(bucket, "main", encode_path(path), Entry(info.address, 3, info.etag, 1, "", (), FILE_MODE).value())


def raw(gw: Gateway, method: str, path_and_query: str, body: bytes = b"") -> tuple[int, bytes]:
    url = gw.url + path_and_query
    hdrs = signed_headers(method, url, {}, "UNSIGNED-PAYLOAD")
    try:
        with urllib.request.urlopen(urllib.request.Request(url, data=body or None, headers=hdrs, method=method)) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def keys(doc: bytes, tag: str = "Contents") -> list[str]:
    root = ET.fromstring(doc.decode("utf-8"))  # strict UTF-8, then a real XML parser
    return [el.findtext(f"{NS}Key") or "" for el in root.iter(f"{NS}{tag}")]


def test_item4_writes_of_a_key_that_is_not_utf8_are_refused(gw: Gateway, s3: Any, bucket: str) -> None:
    s3.put_object(Bucket=bucket, Key="main/ok.txt", Body=b"ok")
    for method, query, headers in (
        ("PUT", "", {}), ("POST", "?uploads", {}), ("PUT", "", {"x-amz-copy-source": f"/{bucket}/main/ok.txt"}),
    ):
        url = f"{gw.url}/{bucket}/main/dir/bad%FFname.txt{query}"
        hdrs = signed_headers(method, url, headers, "UNSIGNED-PAYLOAD")
        with pytest.raises(urllib.error.HTTPError) as info:
            urllib.request.urlopen(urllib.request.Request(url, data=b"x" if method == "PUT" else None, headers=hdrs, method=method))
        assert info.value.code == 400, method
        root = ET.fromstring(info.value.read().decode("utf-8"))
        assert root.findtext("Code") == "InvalidURI" and "\n" not in (root.findtext("Message") or "\n")
    assert [o["Key"] for o in s3.list_objects_v2(Bucket=bucket, Prefix="main/")["Contents"]] == ["main/ok.txt"]


def test_item4_an_old_bad_key_keeps_listings_valid(gw: Gateway, s3: Any, bucket: str) -> None:
    plant(gw, bucket, f"dir/{BAD}")
    s3.put_object(Bucket=bucket, Key="main/dir/good.txt", Body=b"g")
    shown = "main/dir/bad\\xffname.txt"  # each undecodable byte as \xNN
    # boto3 asks for encoding-type=url and decodes the exact %FF to U+FFFD.
    decoded = "main/dir/bad\ufffdname.txt"
    assert [o["Key"] for o in s3.list_objects_v2(Bucket=bucket, Prefix="main/")["Contents"]] == [decoded, "main/dir/good.txt"]
    assert [o["Key"] for o in s3.list_objects(Bucket=bucket, Prefix="main/dir/")["Contents"]] == [decoded, "main/dir/good.txt"]
    # Without it (s3cmd), each document was raw 0xFF before: now UTF-8 XML with the key printable.
    # The raw documents are UTF-8 XML; with encoding-type=url the key's exact bytes come back.
    for query in ("list-type=2&prefix=main/", "prefix=main/", "versions&prefix=main/"):
        status, doc = raw(gw, "GET", f"/{bucket}?{query}")
        assert status == 200 and keys(doc, "Version" if "versions" in query else "Contents")[0] == shown
    status, doc = raw(gw, "GET", f"/{bucket}?list-type=2&prefix=main/&encoding-type=url")
    assert status == 200 and keys(doc)[0] == "main/dir/bad%FFname.txt"
    status, doc = raw(gw, "GET", f"/{bucket}?list-type=2&prefix=main/&delimiter=/")
    assert status == 200 and keys(doc, "CommonPrefixes") == [""] and b"<Prefix>main/dir/</Prefix>" in doc
    # The shown form names no object: an honest NoSuchKey, not a broken document.
    with pytest.raises(ClientError) as info:
        s3.get_object(Bucket=bucket, Key=shown)
    assert code(info) == "NoSuchKey"


DOTTED = ["../x.txt", "a/../../x", "./y", "a/.", "a/./b"]


@pytest.mark.parametrize("path", DOTTED)
def test_writes_of_a_key_with_dot_segments_are_invalid_argument(gw: Gateway, s3: Any, bucket: str, path: str) -> None:
    """PutObject, CopyObject's destination and CreateMultipartUpload refuse a key with a '.' or '..' segment
    (the catalog's key rule, which the API applies too) with S3's 400 InvalidArgument; nothing is staged."""
    s3.put_object(Bucket=bucket, Key="main/ok.txt", Body=b"ok")
    key = "main/" + path
    for write in (
        lambda: s3.put_object(Bucket=bucket, Key=key, Body=b"x"),
        lambda: s3.copy_object(Bucket=bucket, Key=key, CopySource={"Bucket": bucket, "Key": "main/ok.txt"}),
        lambda: s3.create_multipart_upload(Bucket=bucket, Key=key),
    ):
        with pytest.raises(ClientError) as info:
            write()
        assert code(info) == "InvalidArgument" and info.value.response["ResponseMetadata"]["HTTPStatusCode"] == 400
        assert "'.' or '..' path segment" in info.value.response["Error"]["Message"]
    assert [o["Key"] for o in s3.list_objects_v2(Bucket=bucket, Prefix="main/")["Contents"]] == ["main/ok.txt"]
    assert not s3.list_multipart_uploads(Bucket=bucket).get("Uploads")


def test_a_dotted_key_stored_before_the_rule_can_be_read_copied_out_and_deleted(gw: Gateway, s3: Any, bucket: str) -> None:
    plant(gw, bucket, "a/../x")
    assert s3.get_object(Bucket=bucket, Key="main/a/../x")["Body"].read() == b"old"
    s3.copy_object(Bucket=bucket, Key="main/rescued", CopySource={"Bucket": bucket, "Key": "main/a/../x"})
    deleted = s3.delete_objects(Bucket=bucket, Delete={"Objects": [{"Key": "main/a/../x"}]})
    assert [d["Key"] for d in deleted["Deleted"]] == ["main/a/../x"] and not deleted.get("Errors")
    assert [o["Key"] for o in s3.list_objects_v2(Bucket=bucket, Prefix="main/")["Contents"]] == ["main/rescued"]
