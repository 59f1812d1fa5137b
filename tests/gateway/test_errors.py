"""The one table from lakemount errors to S3 codes, and the S3 codes themselves."""

from __future__ import annotations

import pytest

from lakemount import errors as lm
from lakemount.auth.model import CredentialsNotFound, UserAlreadyExists
from lakemount.gateway.errors import CATEGORY_CODES, CODES, S3Error, from_exception, from_lakemount, s3_error

# Codes the gateway promises to use (DESIGN.md §4 and the operations to come).
REQUIRED_CODES = [
    "AccessDenied",
    "SignatureDoesNotMatch",
    "InvalidAccessKeyId",
    "RequestTimeTooSkewed",
    "AuthorizationHeaderMalformed",
    "ExpiredToken",
    "BadDigest",
    "InvalidDigest",
    "InvalidRange",
    "NoSuchUpload",
    "InvalidPart",
    "InvalidPartOrder",
    "EntityTooSmall",
    "EntityTooLarge",
    "IncompleteBody",
    "MalformedXML",
    "BucketNotEmpty",
    "BucketAlreadyExists",
    "BucketAlreadyOwnedByYou",
    "InvalidBucketName",
    "NoSuchBucket",
    "NoSuchKey",
    "NotImplemented",
    "MethodNotAllowed",
    "PreconditionFailed",
    "MissingContentLength",
    "XAmzContentSHA256Mismatch",
    "InvalidArgument",
    "InternalError",
    "ServiceUnavailable",
]


def test_every_category_maps() -> None:
    for category in lm.CATEGORIES:
        assert category in CATEGORY_CODES, category
        code = CATEGORY_CODES[category]
        assert code in CODES
        err = from_lakemount(category("boom"))
        assert err.code == code and 400 <= err.http_status < 600


@pytest.mark.parametrize(
    ("error", "code", "status"),
    [
        (lm.RepositoryNotFound("demo"), "NoSuchBucket", 404),
        (lm.UploadNotFound("u1"), "NoSuchUpload", 404),
        (lm.BranchNotFound("demo", "dev"), "NoSuchKey", 404),
        (lm.ObjectNotFound("demo/main/a"), "NoSuchKey", 404),
        (lm.CommitNotFound("demo", "abc"), "NoSuchKey", 404),
        (lm.AlreadyExists("demo"), "BucketAlreadyOwnedByYou", 409),
        (lm.MergeConflict(["a"]), "OperationAborted", 409),
        (lm.ConcurrentUpdate("cas"), "OperationAborted", 409),
        (lm.NothingToCommit("main"), "PreconditionFailed", 412),
        (lm.InvalidName("repository", "Bad_Name", "lower case only"), "InvalidBucketName", 400),
        (lm.InvalidName("branch", "..", "no dots"), "InvalidArgument", 400),
        (lm.AmbiguousRef("demo", "ab", ["ab1", "ab2"]), "InvalidArgument", 400),
        (lm.ProtectedBranch("demo", "main"), "AccessDenied", 403),
        (lm.ReadOnlyRef("v1"), "AccessDenied", 403),
        (lm.ChecksumMismatch("range abc"), "InternalError", 500),
        (lm.SchemaTooNew(9, 1), "ServiceUnavailable", 503),
        (lm.LakeMountError("uncategorised"), "InternalError", 500),
        (CredentialsNotFound("AKIA"), "NoSuchKey", 404),
        (UserAlreadyExists("alice"), "BucketAlreadyOwnedByYou", 409),
    ],
)
def test_specific_errors(error: lm.LakeMountError, code: str, status: int) -> None:
    err = from_lakemount(error)
    assert (err.code, err.http_status) == (code, status)


def test_messages_and_fields() -> None:
    err = from_lakemount(lm.RepositoryNotFound("demo"), Resource="/demo")
    assert err.fields == {"Resource": "/demo", "BucketName": "demo"}
    assert "demo" in err.message
    # Internal details of corrupt data stay in the server log.
    assert "range abc" not in from_lakemount(lm.ChecksumMismatch("range abc")).message


def test_required_codes_exist_with_s3_statuses() -> None:
    missing = [c for c in REQUIRED_CODES if c not in CODES]
    assert not missing
    assert CODES["NoSuchKey"][0] == 404 and CODES["InvalidRange"][0] == 416
    assert CODES["MissingContentLength"][0] == 411 and CODES["NotImplemented"][0] == 501
    assert CODES["MethodNotAllowed"][0] == 405 and CODES["PreconditionFailed"][0] == 412


def test_s3_error_helpers() -> None:
    err = s3_error("NoSuchUpload", UploadId="u1")
    assert isinstance(err, Exception) and err.http_status == 404 and err.fields == {"UploadId": "u1"}
    assert s3_error("AccessDenied", "Request has expired").message == "Request has expired"
    with pytest.raises(KeyError):
        s3_error("NoSuchThing")
    assert from_exception(err) is err
    assert from_exception(RuntimeError("secret detail")).code == "InternalError"
    assert "secret detail" not in from_exception(RuntimeError("secret detail")).message
    assert from_exception(lm.RepositoryNotFound("x")).code == "NoSuchBucket"
    assert repr(S3Error("X", "m", 400)) == "S3Error('X', 'm', 400)"


@pytest.mark.parametrize("error", [lm.Unavailable("host=db.internal user=admin"), lm.ChecksumMismatch("range abc at s3://b/p")])
def test_server_failures_keep_their_detail_out_of_the_message(error: lm.LakeMountError) -> None:
    err = from_lakemount(error)
    assert err.http_status >= 500 and err.message == CODES[err.code][1]
    assert str(error) not in err.message


def test_missing_upload_is_s3s_no_such_upload() -> None:
    err = from_lakemount(lm.UploadNotFound("abc123"), Key="main/k")
    assert (err.code, err.message, err.fields) == ("NoSuchUpload", CODES["NoSuchUpload"][1], {"UploadId": "abc123"})
