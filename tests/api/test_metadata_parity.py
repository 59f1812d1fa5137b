"""One metadata mapping for the S3 gateway and the REST API (``lakemount/serving/metadata.py``).

An object written through either front end with the standard headers S3
stores (Cache-Control, Content-Disposition, Content-Encoding,
Content-Language, Expires) and user metadata (``x-amz-meta-*`` /
``x-lakefs-meta-*``) shows the same through the other: the same user metadata
in statObject and HeadObject, the same standard headers on every read.
"""

from __future__ import annotations

from typing import Any

import pytest
import requests
from botocore.exceptions import ClientError

from tests.api.conftest import Served
from tests.gateway.server_fixture import ADMIN_KEY, ADMIN_SECRET

AUTH = (ADMIN_KEY, ADMIN_SECRET)
STANDARD = {
    "cache-control": "max-age=60",
    "content-disposition": 'attachment; filename="report.txt"',
    "content-encoding": "gzip",
    "content-language": "fr",
    "expires": "Thu, 01 Jan 2037 00:00:00 GMT",
}
USER = {"owner": "ann", "team": "lake"}


def objects(served: Served, repo: str, path: str, ref: str = "refs/main") -> str:
    return f"{served.api}/api/v1/repositories/{repo}/{ref}/objects{path}"


def api_views(served: Served, repo: str, key: str) -> tuple[dict[str, Any], dict[str, str]]:
    """statObject's JSON and getObject's headers (lower-cased names) of ``key`` on main."""
    stat = requests.get(objects(served, repo, "/stat"), params={"path": key}, auth=AUTH, timeout=30)
    assert stat.status_code == 200, stat.text
    # stream: the body is not read (requests would try to gunzip it, as its Content-Encoding says).
    with requests.get(objects(served, repo, ""), params={"path": key}, auth=AUTH, timeout=30, stream=True) as got:
        assert got.status_code == 200
        headers = {k.lower(): v for k, v in got.headers.items()}
    return stat.json(), headers


def gateway_views(served: Served, repo: str, key: str) -> tuple[dict[str, Any], dict[str, str]]:
    """HeadObject's result and its headers (lower-cased names) of ``key`` on main."""
    head = served.gateway.client().head_object(Bucket=repo, Key=f"main/{key}")
    return head, {k.lower(): v for k, v in head["ResponseMetadata"]["HTTPHeaders"].items()}


def test_an_object_put_through_the_gateway_shows_the_same_metadata_through_the_api(served: Served, repo: Any) -> None:
    served.gateway.client().put_object(
        Bucket=repo.id, Key="main/from-s3.txt", Body=b"x", ContentType="text/plain",
        CacheControl=STANDARD["cache-control"], ContentDisposition=STANDARD["content-disposition"],
        ContentEncoding=STANDARD["content-encoding"], ContentLanguage=STANDARD["content-language"],
        Expires=STANDARD["expires"], Metadata=USER,
    )
    head, gw_headers = gateway_views(served, repo.id, "from-s3.txt")
    stat, api_headers = api_views(served, repo.id, "from-s3.txt")
    assert head["Metadata"] == USER and stat["metadata"] == USER
    assert stat["content_type"] == head["ContentType"] == "text/plain"
    for name, value in STANDARD.items():
        assert gw_headers.get(name) == api_headers.get(name) == value, name
    assert {k: api_headers.get("x-lakefs-meta-" + k) for k in USER} == USER


def test_an_object_uploaded_through_the_api_shows_the_same_metadata_through_the_gateway(served: Served, repo: Any) -> None:
    headers = {**STANDARD, "content-type": "text/plain", **{"x-lakefs-meta-" + k: v for k, v in USER.items()}}
    put = requests.post(objects(served, repo.id, "", "branches/main"), params={"path": "from-api.txt"}, data=b"x",
                        headers=headers, auth=AUTH, timeout=30)
    assert put.status_code == 201, put.text
    assert put.json()["metadata"] == USER  # the standard headers are not user metadata
    head, gw_headers = gateway_views(served, repo.id, "from-api.txt")
    stat, api_headers = api_views(served, repo.id, "from-api.txt")
    assert head["Metadata"] == USER and stat["metadata"] == USER
    assert stat["content_type"] == head["ContentType"] == "text/plain"
    for name, value in STANDARD.items():
        assert gw_headers.get(name) == api_headers.get(name) == value, name


def test_too_much_user_metadata_is_refused_by_both_with_their_own_error(served: Served, repo: Any) -> None:
    with pytest.raises(ClientError) as e:
        served.gateway.client().put_object(Bucket=repo.id, Key="main/big", Body=b"x", Metadata={"k": "v" * 3000})
    assert e.value.response["Error"]["Code"] == "MetadataTooLarge"
    assert e.value.response["Error"].get("MaxSizeAllowed") == "2048"
    put = requests.post(objects(served, repo.id, "", "branches/main"), params={"path": "big"}, data=b"x",
                        headers={"x-lakefs-meta-k": "v" * 3000}, auth=AUTH, timeout=30)
    assert put.status_code == 400 and "user metadata larger than 2048 bytes" in put.text
