"""S3 XML rendering, listings included (checked with botocore's own response parser), and safe parsing."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from datetime import UTC, datetime, timedelta
from typing import Any

import botocore.session
import pytest
from botocore import handlers, parsers, serialize

from lakemount.catalog.model import Entry
from lakemount.gateway import listing_xml
from lakemount.gateway import xml as s3xml
from lakemount.gateway.errors import S3Error, s3_error

T = datetime(2024, 1, 2, 3, 4, 5, 678000, tzinfo=UTC)
NASTY_KEYS = ["a&b<c>d\"e'f", "ü/日本/🦆", "sp ace+plus%percent", "tab\tnew\nline\rcr", "ctl\x01\x1f", "x//y/"]
_MODEL = botocore.session.get_session().get_service_model("s3")


def boto_parse(operation: str, body: bytes, status: int = 200) -> dict[str, Any]:
    parser = parsers.create_parser("rest-xml")
    op = _MODEL.operation_model(operation)
    response = {"body": body, "headers": {}, "status_code": status}
    assert op.output_shape is not None
    return parser.parse(response, op.output_shape)  # type: ignore[no-any-return]


def test_escape() -> None:
    assert s3xml.escape("a&b<c>\"'") == "a&amp;b&lt;c&gt;&quot;&apos;"
    assert s3xml.escape("\t\n") == "\t\n" and s3xml.escape("\r\x01") == "&#xD;&#x1;"
    assert s3xml.timestamp(T) == "2024-01-02T03:04:05.678Z"
    assert s3xml.quote_etag("abc") == '"abc"' and s3xml.quote_etag('"abc"') == '"abc"'


def entry(etag: str = "e", size: int = 1) -> Entry:
    return Entry("data/x", size, etag, int(T.timestamp()) * 1_000_000_000 + T.microsecond * 1000)


def test_list_objects_v2_round_trips_through_botocore() -> None:
    keys = ["main/a.txt", "main/sp ace+plus.csv", "main/ü.parquet", "main/a&b<c>"]
    items = [(k, entry("d41d8cd98f00b204e9800998ecf8427e", 7)) for k in keys] + [("main/dir/", None), ("main/dir two/", None)]
    body = listing_xml.render_v2(
        bucket="repo",
        prefix="main/",
        delimiter="/",
        max_keys=1000,
        items=items,
        truncated=True,
        continuation_token="tok&1",
        next_token="tok2",
        start_after="main/",
        encoding_type=None,
        owner=None,
    )
    parsed = boto_parse("ListObjectsV2", body)
    assert [c["Key"] for c in parsed["Contents"]] == keys
    assert parsed["Contents"][0]["ETag"] == '"d41d8cd98f00b204e9800998ecf8427e"'
    # Whole seconds, as S3 and the Last-Modified header (objects.last_modified): rounded up, never before the write.
    assert parsed["Contents"][0]["LastModified"] == T.replace(microsecond=0) + timedelta(seconds=1)
    assert parsed["Contents"][0]["Size"] == 7
    assert [p["Prefix"] for p in parsed["CommonPrefixes"]] == ["main/dir/", "main/dir two/"]
    assert parsed["KeyCount"] == 6 and parsed["IsTruncated"] is True
    assert parsed["NextContinuationToken"] == "tok2" and parsed["ContinuationToken"] == "tok&1"


def test_encoding_type_url_round_trips_through_botocore() -> None:
    body = listing_xml.render_v2(
        bucket="repo",
        prefix="main/ü ",
        delimiter="/",
        max_keys=2,
        items=[(k, entry()) for k in NASTY_KEYS] + [("p+q r/", None)],
        truncated=False,
        continuation_token=None,
        next_token=None,
        start_after=None,
        encoding_type="url",
        owner=None,
    )
    assert b"\x01" not in body and b"&#x1;" not in body  # nothing XML 1.0 could choke on
    parsed = boto_parse("ListObjectsV2", body)
    handlers.decode_list_object_v2(parsed, context={"encoding_type_auto_set": True})
    assert [c["Key"] for c in parsed["Contents"]] == NASTY_KEYS
    assert parsed["Prefix"] == "main/ü " and parsed["CommonPrefixes"][0]["Prefix"] == "p+q r/"
    with pytest.raises(S3Error, match="InvalidArgument"):
        listing_xml.encoder("base64")


def test_nasty_keys_survive_plain_xml() -> None:
    keys = [k for k in NASTY_KEYS if "\x01" not in k]
    body = listing_xml.render_v1(
        bucket="repo",
        prefix="",
        marker="",
        delimiter="",
        max_keys=1000,
        items=[(k, entry()) for k in keys],
        truncated=False,
        encoding_type=None,
        owner="me",
    )
    parsed = boto_parse("ListObjects", body)
    assert [c["Key"] for c in parsed["Contents"]] == keys
    assert parsed["Contents"][0]["Owner"] == {"ID": "me", "DisplayName": "me"}


def test_list_objects_v1_next_marker_and_url_encoding() -> None:
    body = listing_xml.render_v1(
        bucket="repo",
        prefix="a b",
        marker="m+1",
        delimiter="/",
        max_keys=1,
        items=[("a b/c", entry())],
        truncated=True,
        encoding_type="url",
        owner="me",
    )
    parsed = boto_parse("ListObjects", body)
    handlers.decode_list_object(parsed, context={"encoding_type_auto_set": True})
    assert parsed["NextMarker"] == "a b/c" and parsed["Marker"] == "m+1"
    assert parsed["Contents"][0]["Key"] == "a b/c" and parsed["EncodingType"] == "url"


def test_other_results_parse_with_botocore() -> None:
    owner = s3xml.Owner("owner-id", "owner")
    buckets = boto_parse("ListBuckets", s3xml.render_list_buckets([s3xml.BucketRecord("demo", T)], owner))
    assert buckets["Buckets"] == [{"Name": "demo", "CreationDate": T}] and buckets["Owner"]["ID"] == "owner-id"

    init = boto_parse("CreateMultipartUpload", s3xml.render_initiate_multipart_upload("demo", "main/a&b", "u1"))
    assert (init["Bucket"], init["Key"], init["UploadId"]) == ("demo", "main/a&b", "u1")

    done = boto_parse(
        "CompleteMultipartUpload",
        s3xml.render_complete_multipart_upload(
            location="http://h/demo/main/a",
            bucket="demo",
            key="main/a",
            etag="abc-2",
            checksums=[("crc32", "AAAAAA==")],
        ),
    )
    assert done["ETag"] == '"abc-2"' and done["ChecksumCRC32"] == "AAAAAA=="

    parts = boto_parse(
        "ListParts",
        s3xml.render_list_parts(
            bucket="demo", key="main/a", upload_id="u1", part_number_marker=0, next_part_number_marker=2,
            max_parts=2, is_truncated=True, owner=owner,
            parts=[s3xml.PartRecord(1, T, "e1", 5 * 2**20), s3xml.PartRecord(2, T, "e2", 3, (("SHA256", "x"),))],
        ),
    )  # fmt: skip
    assert [p["PartNumber"] for p in parts["Parts"]] == [1, 2] and parts["Parts"][1]["ChecksumSHA256"] == "x"
    assert (
        parts["IsTruncated"] is True and parts["NextPartNumberMarker"] == 2 and parts["Initiator"]["ID"] == "owner-id"
    )

    uploads = boto_parse(
        "ListMultipartUploads",
        s3xml.render_list_multipart_uploads(
            bucket="demo", prefix="", key_marker="", upload_id_marker="", max_uploads=1000, delimiter=None,
            is_truncated=False, uploads=[s3xml.UploadRecord("main/a", "u1", T, owner=owner)],
        ),
    )  # fmt: skip
    assert uploads["Uploads"][0]["UploadId"] == "u1" and uploads["Uploads"][0]["Initiated"] == T

    versions = boto_parse(
        "ListObjectVersions",
        s3xml.render_list_versions(
            bucket="demo", prefix="", key_marker="", version_id_marker="", max_keys=1000, delimiter=None,
            is_truncated=False, common_prefixes=[],
            versions=[
                s3xml.VersionRecord("main/a", "v1", True, T, "e", 3),
                s3xml.VersionRecord("main/b", "v2", True, T, delete_marker=True),
            ],
        ),
    )  # fmt: skip
    assert versions["Versions"][0]["VersionId"] == "v1" and versions["DeleteMarkers"][0]["Key"] == "main/b"

    copy = boto_parse("CopyObject", s3xml.render_copy_object_result("abc", T))
    assert copy["CopyObjectResult"] == {"ETag": '"abc"', "LastModified": T}
    part = boto_parse("UploadPartCopy", s3xml.render_copy_part_result("abc", T))
    assert part["CopyPartResult"]["ETag"] == '"abc"'

    deleted = boto_parse(
        "DeleteObjects",
        s3xml.render_delete_result(
            [s3xml.DeletedRecord("main/a"), s3xml.DeletedRecord("main/b", "v", True, "dm")],
            [s3xml.DeleteErrorRecord("main/c", "AccessDenied", "Access Denied")],
        ),
    )
    assert [d["Key"] for d in deleted["Deleted"]] == ["main/a", "main/b"] and deleted["Deleted"][1]["DeleteMarker"]
    assert deleted["Errors"] == [{"Key": "main/c", "Code": "AccessDenied", "Message": "Access Denied"}]
    quiet = boto_parse("DeleteObjects", s3xml.render_delete_result([s3xml.DeletedRecord("main/a")], [], quiet=True))
    assert "Deleted" not in quiet

    assert ET.fromstring(s3xml.render_location_constraint("us-east-1")).text is None
    # botocore reads GetBucketLocation with a handler of its own, not the parser.
    parsed: dict[str, Any] = {}
    http = type(
        "R", (), {"content": s3xml.render_location_constraint("eu-west-1"), "status_code": 200, "raw": object()}
    )()
    handlers.parse_get_bucket_location(parsed, http)
    assert parsed["LocationConstraint"] == "eu-west-1"


def test_error_document() -> None:
    err = s3_error("NoSuchKey", Key="main/a&b", BucketName="demo")
    body = s3xml.render_error(err, resource="/demo/main/a&b", request_id="req-1")
    root = ET.fromstring(body)
    assert [c.tag for c in root] == ["Code", "Message", "Key", "BucketName", "Resource", "RequestId", "HostId"]
    assert root.findtext("Key") == "main/a&b" and root.findtext("RequestId") == "req-1"
    parsed = parsers.create_parser("rest-xml").parse(
        {"body": body, "headers": {}, "status_code": 404},
        _MODEL.operation_model("GetObject").output_shape,  # type: ignore[arg-type]
    )
    assert parsed["Error"]["Code"] == "NoSuchKey"


# --- parsing request bodies ---------------------------------------------------------------


def boto_body(operation: str, params: dict[str, Any]) -> bytes:
    serializer = serialize.create_serializer("rest-xml")
    request = serializer.serialize_to_request(params, _MODEL.operation_model(operation))
    return request["body"]  # type: ignore[no-any-return]


def test_parse_complete_multipart_upload_from_botocore() -> None:
    body = boto_body(
        "CompleteMultipartUpload",
        {
            "Bucket": "demo",
            "Key": "main/a",
            "UploadId": "u1",
            "MultipartUpload": {
                "Parts": [
                    {"PartNumber": 1, "ETag": '"e1"', "ChecksumCRC32": "AAAAAA=="},
                    {"PartNumber": 3, "ETag": "e3"},
                ]
            },
        },
    )
    parts = s3xml.parse_complete_multipart_upload(body)
    assert parts == [
        s3xml.CompletedPart(1, "e1", (("CRC32", "AAAAAA=="),)),
        s3xml.CompletedPart(3, "e3"),
    ]


def test_parse_delete_from_botocore() -> None:
    keys = ["main/a", " main/leading and trailing ", "main/a&b<c>", "main/ü"]
    body = boto_body(
        "DeleteObjects",
        {
            "Bucket": "demo",
            "Delete": {"Objects": [{"Key": k} for k in keys] + [{"Key": "v", "VersionId": "1"}], "Quiet": True},
        },
    )
    request = s3xml.parse_delete(body)
    assert request.quiet is True
    assert [o.key for o in request.objects] == [*keys, "v"] and request.objects[-1].version_id == "1"


def test_parse_create_bucket_configuration() -> None:
    body = boto_body(
        "CreateBucket", {"Bucket": "demo", "CreateBucketConfiguration": {"LocationConstraint": "eu-west-1"}}
    )
    assert s3xml.parse_create_bucket_configuration(body) == "eu-west-1"
    assert s3xml.parse_create_bucket_configuration(b"") is None
    assert s3xml.parse_create_bucket_configuration(b"<CreateBucketConfiguration/>") is None


BILLION_LAUGHS = b"""<?xml version="1.0"?>
<!DOCTYPE lolz [<!ENTITY lol "lol"><!ENTITY lol2 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">]>
<Delete><Object><Key>&lol2;</Key></Object></Delete>"""
EXTERNAL = b"""<?xml version="1.0"?>
<!DOCTYPE d [<!ENTITY xxe SYSTEM "file:///etc/passwd">]><Delete><Object><Key>&xxe;</Key></Object></Delete>"""


@pytest.mark.parametrize(
    "body",
    [
        b"",
        b"not xml",
        b"<Delete><Object><Key>a</Key></Object>",  # unclosed
        b"<Other><Object><Key>a</Key></Object></Other>",
        b"<Delete></Delete>",
        b"<Delete><Object><VersionId>1</VersionId></Object></Delete>",
        b"<Delete><Quiet>maybe</Quiet><Object><Key>a</Key></Object></Delete>",
        b"<Delete>" + b"<Object><Key>k</Key></Object>" * 1001 + b"</Delete>",
        b"<Delete><Object><Key>&undefined;</Key></Object></Delete>",
        BILLION_LAUGHS,
        EXTERNAL,
        b"<Delete>" + b"<a>" * 20 + b"</a>" * 20 + b"</Delete>",
        b"<Delete>" + b" " * (s3xml.MAX_BODY_BYTES + 1) + b"</Delete>",
    ],
)
def test_bad_delete_bodies(body: bytes) -> None:
    with pytest.raises(S3Error) as exc:
        s3xml.parse_delete(body)
    assert exc.value.code == "MalformedXML" and exc.value.http_status == 400


@pytest.mark.parametrize(
    "body",
    [
        b"<CompleteMultipartUpload></CompleteMultipartUpload>",
        b"<CompleteMultipartUpload><Part><ETag>e</ETag></Part></CompleteMultipartUpload>",
        b"<CompleteMultipartUpload><Part><PartNumber>0</PartNumber><ETag>e</ETag></Part></CompleteMultipartUpload>",
        b"<CompleteMultipartUpload><Part><PartNumber>10001</PartNumber><ETag>e</ETag></Part></CompleteMultipartUpload>",
        b"<CompleteMultipartUpload><Part><PartNumber>x</PartNumber><ETag>e</ETag></Part></CompleteMultipartUpload>",
        b"<CompleteMultipartUpload><Part><PartNumber>1</PartNumber></Part></CompleteMultipartUpload>",
    ],
)
def test_bad_complete_bodies(body: bytes) -> None:
    with pytest.raises(S3Error, match="MalformedXML"):
        s3xml.parse_complete_multipart_upload(body)


def test_namespaced_body_is_accepted() -> None:
    body = (
        b'<?xml version="1.0" encoding="UTF-8"?><Delete xmlns="http://s3.amazonaws.com/doc/2006-03-01/">'
        b"<Object><Key>a</Key></Object></Delete>"
    )
    assert s3xml.parse_delete(body).objects[0].key == "a"
