"""Multipart uploads through a real gateway with two worker processes.

Upload state lives in the ref store and parts in the block store, so the parts
of one upload may reach different workers; each test uses several connections
to make sure they do.
"""

from __future__ import annotations

import hashlib
import os
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from botocore.exceptions import ClientError

from .server_fixture import Gateway, code

MiB = 1024 * 1024


def s3_multipart_etag(parts: list[bytes]) -> str:
    return hashlib.md5(b"".join(hashlib.md5(p).digest() for p in parts)).hexdigest() + f"-{len(parts)}"


def test_upload_parts_in_parallel_from_many_connections(gw: Gateway, s3: Any, bucket: str) -> None:
    parts = [os.urandom(5 * MiB) for _ in range(3)] + [os.urandom(123)]
    up = s3.create_multipart_upload(Bucket=bucket, Key="main/mp/obj.bin", ContentType="application/x-test", Metadata={"k": "v"})
    clients = [gw.client() for _ in range(4)]

    def send(i: int) -> dict[str, Any]:
        r = clients[i % 4].upload_part(Bucket=bucket, Key="main/mp/obj.bin", UploadId=up["UploadId"], PartNumber=i + 1, Body=parts[i])
        return {"PartNumber": i + 1, "ETag": r["ETag"]}

    with ThreadPoolExecutor(4) as pool:
        done = list(pool.map(send, range(len(parts))))
    listed = s3.list_parts(Bucket=bucket, Key="main/mp/obj.bin", UploadId=up["UploadId"])
    assert [p["PartNumber"] for p in listed["Parts"]] == [1, 2, 3, 4]
    assert [p["Size"] for p in listed["Parts"]] == [len(p) for p in parts]
    uploads = s3.list_multipart_uploads(Bucket=bucket)["Uploads"]
    assert [(u["Key"], u["UploadId"]) for u in uploads] == [("main/mp/obj.bin", up["UploadId"])]
    # Not visible until completed.
    with pytest.raises(ClientError):
        s3.head_object(Bucket=bucket, Key="main/mp/obj.bin")
    res = s3.complete_multipart_upload(Bucket=bucket, Key="main/mp/obj.bin", UploadId=up["UploadId"], MultipartUpload={"Parts": done})
    assert res["ETag"] == f'"{s3_multipart_etag(parts)}"'
    got = s3.get_object(Bucket=bucket, Key="main/mp/obj.bin")
    assert got["Body"].read() == b"".join(parts)
    assert got["ETag"] == res["ETag"] and got["ContentType"] == "application/x-test" and got["Metadata"] == {"k": "v"}
    assert "Uploads" not in s3.list_multipart_uploads(Bucket=bucket)
    # Parts of a completed multipart object can be read one by one.
    second = s3.get_object(Bucket=bucket, Key="main/mp/obj.bin", PartNumber=2)
    assert second["PartsCount"] == 4 and second["Body"].read() == parts[1]
    # A retried completion gets the same answer.
    again = s3.complete_multipart_upload(Bucket=bucket, Key="main/mp/obj.bin", UploadId=up["UploadId"], MultipartUpload={"Parts": done})
    assert again["ETag"] == res["ETag"]
    # The part objects are gone from the block store.
    ns = gw.app().catalog.repository(bucket).storage_namespace
    leftovers = list(gw.app().catalog.adapter.list(f"{ns}/_lakefs/multipart/{up['UploadId']}/"))
    assert leftovers == []


def test_boto3_managed_transfer(gw: Gateway, s3: Any, bucket: str, tmp_path: Any) -> None:
    from boto3.s3.transfer import TransferConfig

    data = os.urandom(17 * MiB)
    src = tmp_path / "src.bin"
    src.write_bytes(data)
    cfg = TransferConfig(multipart_threshold=5 * MiB, multipart_chunksize=5 * MiB, max_concurrency=4)
    s3.upload_file(str(src), bucket, "main/managed.bin", Config=cfg)
    dst = tmp_path / "dst.bin"
    s3.download_file(bucket, "main/managed.bin", str(dst), Config=cfg)
    assert dst.read_bytes() == data
    assert s3.head_object(Bucket=bucket, Key="main/managed.bin")["ETag"].endswith('-4"')


def test_resent_part_replaces_the_first(s3: Any, bucket: str) -> None:
    up = s3.create_multipart_upload(Bucket=bucket, Key="main/resend")
    s3.upload_part(Bucket=bucket, Key="main/resend", UploadId=up["UploadId"], PartNumber=1, Body=b"first")
    r = s3.upload_part(Bucket=bucket, Key="main/resend", UploadId=up["UploadId"], PartNumber=1, Body=b"second")
    parts = s3.list_parts(Bucket=bucket, Key="main/resend", UploadId=up["UploadId"])["Parts"]
    assert len(parts) == 1 and parts[0]["ETag"] == r["ETag"]
    s3.complete_multipart_upload(Bucket=bucket, Key="main/resend", UploadId=up["UploadId"],
                                 MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": r["ETag"]}]})
    assert s3.get_object(Bucket=bucket, Key="main/resend")["Body"].read() == b"second"


def test_upload_part_copy(s3: Any, bucket: str) -> None:
    src = os.urandom(6 * MiB)
    s3.put_object(Bucket=bucket, Key="main/src", Body=src)
    up = s3.create_multipart_upload(Bucket=bucket, Key="main/copied")
    p1 = s3.upload_part_copy(Bucket=bucket, Key="main/copied", UploadId=up["UploadId"], PartNumber=1,
                             CopySource={"Bucket": bucket, "Key": "main/src"}, CopySourceRange=f"bytes=0-{5 * MiB - 1}")
    p2 = s3.upload_part_copy(Bucket=bucket, Key="main/copied", UploadId=up["UploadId"], PartNumber=2,
                             CopySource={"Bucket": bucket, "Key": "main/src"})
    parts = [{"PartNumber": 1, "ETag": p1["CopyPartResult"]["ETag"]}, {"PartNumber": 2, "ETag": p2["CopyPartResult"]["ETag"]}]
    s3.complete_multipart_upload(Bucket=bucket, Key="main/copied", UploadId=up["UploadId"], MultipartUpload={"Parts": parts})
    assert s3.get_object(Bucket=bucket, Key="main/copied")["Body"].read() == src[: 5 * MiB] + src
    with pytest.raises(ClientError) as e:
        up2 = s3.create_multipart_upload(Bucket=bucket, Key="main/bad")
        s3.upload_part_copy(Bucket=bucket, Key="main/bad", UploadId=up2["UploadId"], PartNumber=1,
                            CopySource={"Bucket": bucket, "Key": "main/src"}, CopySourceRange=f"bytes=0-{7 * MiB}")
    assert code(e) == "InvalidRange"


def test_completion_errors(s3: Any, bucket: str) -> None:
    up = s3.create_multipart_upload(Bucket=bucket, Key="main/e")
    uid = up["UploadId"]
    small = s3.upload_part(Bucket=bucket, Key="main/e", UploadId=uid, PartNumber=1, Body=b"tiny")
    last = s3.upload_part(Bucket=bucket, Key="main/e", UploadId=uid, PartNumber=2, Body=b"last")
    with pytest.raises(ClientError) as e:
        s3.complete_multipart_upload(Bucket=bucket, Key="main/e", UploadId=uid, MultipartUpload={"Parts": [
            {"PartNumber": 1, "ETag": small["ETag"]}, {"PartNumber": 2, "ETag": last["ETag"]}]})
    assert code(e) == "EntityTooSmall"
    with pytest.raises(ClientError) as e:
        s3.complete_multipart_upload(Bucket=bucket, Key="main/e", UploadId=uid, MultipartUpload={"Parts": [
            {"PartNumber": 1, "ETag": '"00000000000000000000000000000000"'}]})
    assert code(e) == "InvalidPart"
    with pytest.raises(ClientError) as e:
        s3.complete_multipart_upload(Bucket=bucket, Key="main/e", UploadId=uid, MultipartUpload={"Parts": [
            {"PartNumber": 2, "ETag": last["ETag"]}, {"PartNumber": 1, "ETag": small["ETag"]}]})
    assert code(e) == "InvalidPartOrder"
    with pytest.raises(ClientError) as e:
        s3.complete_multipart_upload(Bucket=bucket, Key="main/e", UploadId="no-such-upload",
                                     MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": small["ETag"]}]})
    assert code(e) == "NoSuchUpload"
    with pytest.raises(ClientError) as e:
        s3.upload_part(Bucket=bucket, Key="main/other-key", UploadId=uid, PartNumber=1, Body=b"x")
    assert code(e) == "NoSuchUpload"
    s3.abort_multipart_upload(Bucket=bucket, Key="main/e", UploadId=uid)
    with pytest.raises(ClientError) as e:
        s3.abort_multipart_upload(Bucket=bucket, Key="main/e", UploadId=uid)
    assert code(e) == "NoSuchUpload"
    with pytest.raises(ClientError) as e:
        s3.list_parts(Bucket=bucket, Key="main/e", UploadId=uid)
    assert code(e) == "NoSuchUpload"
    with pytest.raises(ClientError):
        s3.head_object(Bucket=bucket, Key="main/e")


def test_list_multipart_uploads_paginates(s3: Any, bucket: str) -> None:
    ids = {}
    for key in ("main/a/1", "main/a/2", "main/b", "main/c/x/y"):
        ids[key] = s3.create_multipart_upload(Bucket=bucket, Key=key)["UploadId"]
    page = s3.list_multipart_uploads(Bucket=bucket, MaxUploads=2)
    assert [u["Key"] for u in page["Uploads"]] == ["main/a/1", "main/a/2"] and page["IsTruncated"]
    rest = s3.list_multipart_uploads(Bucket=bucket, KeyMarker=page["NextKeyMarker"], UploadIdMarker=page["NextUploadIdMarker"])
    assert [u["Key"] for u in rest["Uploads"]] == ["main/b", "main/c/x/y"]
    grouped = s3.list_multipart_uploads(Bucket=bucket, Prefix="main/", Delimiter="/")
    assert [p["Prefix"] for p in grouped["CommonPrefixes"]] == ["main/a/", "main/c/"]
    assert [u["Key"] for u in grouped["Uploads"]] == ["main/b"]
    for key, uid in ids.items():
        s3.abort_multipart_upload(Bucket=bucket, Key=key, UploadId=uid)
