"""Branch protection through the S3 gateway (boto3): AccessDenied on every write to a protected branch."""

from __future__ import annotations

from typing import Any

import pytest
from botocore.exceptions import ClientError

from .server_fixture import Gateway, code


def test_protected_branch_refuses_s3_writes(gw: Gateway, s3: Any, bucket: str) -> None:
    s3.put_object(Bucket=bucket, Key="main/kept.csv", Body=b"a,b\n")
    gw.cli("commit", f"lakefs://{bucket}/main", "-m", "seed")
    gw.cli("branch", "create", f"lakefs://{bucket}/dev", "--source", f"lakefs://{bucket}/main")
    gw.cli("branch-protect", "add", f"lakefs://{bucket}", "main")
    refused = {
        "put": lambda: s3.put_object(Bucket=bucket, Key="main/new.csv", Body=b"x"),
        "delete": lambda: s3.delete_object(Bucket=bucket, Key="main/kept.csv"),
        "copy": lambda: s3.copy_object(Bucket=bucket, Key="main/copy.csv", CopySource={"Bucket": bucket, "Key": "main/kept.csv"}),
        "multipart": lambda: s3.create_multipart_upload(Bucket=bucket, Key="main/big.bin"),
    }
    for what, call in refused.items():
        with pytest.raises(ClientError) as info:
            call()
        assert code(info) == "AccessDenied", what
        assert info.value.response["ResponseMetadata"]["HTTPStatusCode"] == 403
        assert "protected" in info.value.response["Error"]["Message"], what
    res = s3.delete_objects(Bucket=bucket, Delete={"Objects": [{"Key": "main/kept.csv"}]})
    assert [e["Code"] for e in res.get("Errors", [])] == ["AccessDenied"]
    assert s3.get_object(Bucket=bucket, Key="main/kept.csv")["Body"].read() == b"a,b\n"
    # Other branches take writes; a merge brings them in.
    s3.put_object(Bucket=bucket, Key="dev/new.csv", Body=b"x")
    gw.cli("commit", f"lakefs://{bucket}/dev", "-m", "on dev")
    gw.cli("merge", f"lakefs://{bucket}/dev", f"lakefs://{bucket}/main")
    assert s3.get_object(Bucket=bucket, Key="main/new.csv")["Body"].read() == b"x"
    gw.cli("branch-protect", "delete", f"lakefs://{bucket}", "main")
    s3.put_object(Bucket=bucket, Key="main/after.csv", Body=b"y")
