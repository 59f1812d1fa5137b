"""S3 error codes, and the one table translating lakemount errors into them.

``S3Error`` is what every gateway module raises for a failure the client must
see; the HTTP layer renders it with ``xml.render_error``.  ``CODES`` lists every
code the gateway uses with its HTTP status and S3's usual message;
``CATEGORY_CODES`` maps each category of :mod:`lakemount.errors` (never the
individual classes, see STYLE.md) to one of them, and ``from_lakemount`` applies
it, refining only where S3 has a more specific word for the same thing (a
missing repository is a missing *bucket*, a missing upload ``NoSuchUpload``).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from types import MappingProxyType

from lakemount import errors as lm

log = logging.getLogger("lakemount.gateway")


class S3Error(Exception):
    """An S3 error response: code, message, HTTP status, and extra XML fields.

    ``fields`` become child elements of ``<Error>`` in insertion order (``Key``,
    ``BucketName``, ``StringToSign``, ...); values are rendered with ``str``.
    """

    def __init__(self, code: str, message: str, http_status: int, **fields: object) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.http_status = http_status
        self.fields: dict[str, object] = fields

    def __repr__(self) -> str:
        return f"S3Error({self.code!r}, {self.message!r}, {self.http_status})"


# code -> (HTTP status, default message); messages are S3's own where it has one
# because some clients and test suites match on them.
CODES: Mapping[str, tuple[int, str]] = MappingProxyType(
    {
        "AccessDenied": (403, "Access Denied"),
        "AuthorizationHeaderMalformed": (400, "The authorization header is malformed."),
        "AuthorizationQueryParametersError": (400, "Error parsing the X-Amz-Credential parameter."),
        "BadDigest": (
            400,
            "The Content-MD5 or checksum value that you specified did not match what the server received.",
        ),
        "BucketAlreadyExists": (409, "The requested bucket name is not available."),
        "BucketAlreadyOwnedByYou": (
            409,
            "Your previous request to create the named bucket succeeded and you already own it.",
        ),
        "BucketNotEmpty": (409, "The bucket you tried to delete is not empty."),
        "EntityTooLarge": (400, "Your proposed upload exceeds the maximum allowed object size."),
        "EntityTooSmall": (400, "Your proposed upload is smaller than the minimum allowed object size."),
        "ExpiredToken": (400, "The provided token has expired."),
        "IncompleteBody": (400, "You did not provide the number of bytes specified by the Content-Length HTTP header."),
        "InternalError": (500, "We encountered an internal error. Please try again."),
        "InvalidAccessKeyId": (403, "The AWS Access Key Id you provided does not exist in our records."),
        "InvalidArgument": (400, "Invalid Argument"),
        "InvalidObjectState": (403, "The operation is not valid for the current state of the object."),
        "InvalidBucketName": (400, "The specified bucket is not valid."),
        "InvalidChunkSizeError": (403, "Only the last chunk is allowed to have a size less than 8192 bytes"),
        "InvalidDigest": (400, "The Content-MD5 or checksum value that you specified is not valid."),
        "InvalidPart": (
            400,
            "One or more of the specified parts could not be found. The part might not have been uploaded, "
            "or the specified entity tag might not have matched the part's entity tag.",
        ),
        "InvalidPartOrder": (
            400,
            "The list of parts was not in ascending order. Parts must be ordered by part number.",
        ),
        "InvalidRange": (416, "The requested range is not satisfiable"),
        "InvalidRequest": (400, "Invalid Request"),
        "KeyTooLongError": (400, "Your key is too long"),
        "MalformedTrailerError": (
            400,
            "The request contained trailing data that was not well-formed or did not conform to our published schema.",
        ),
        "MalformedXML": (
            400,
            "The XML you provided was not well-formed or did not validate against our published schema.",
        ),
        "MetadataTooLarge": (400, "Your metadata headers exceed the maximum allowed metadata size."),
        "MethodNotAllowed": (405, "The specified method is not allowed against this resource."),
        "MissingContentLength": (411, "You must provide the Content-Length HTTP header."),
        "MissingSecurityHeader": (400, "Your request is missing a required header."),
        "NoSuchBucket": (404, "The specified bucket does not exist."),
        "NoSuchKey": (404, "The specified key does not exist."),
        "NoSuchUpload": (
            404,
            "The specified multipart upload does not exist. The upload ID might be invalid, "
            "or the multipart upload might have been aborted or completed.",
        ),
        "NoSuchVersion": (404, "The specified version does not exist."),
        "NotImplemented": (501, "A header you provided implies functionality that is not implemented."),
        "OperationAborted": (
            409,
            "A conflicting conditional operation is currently in progress against this resource. Try again.",
        ),
        "PreconditionFailed": (412, "At least one of the preconditions you specified did not hold."),
        "RequestTimeTooSkewed": (403, "The difference between the request time and the server's time is too large."),
        "ServiceUnavailable": (503, "Service is unable to handle request."),
        "SignatureDoesNotMatch": (
            403,
            "The request signature we calculated does not match the signature you provided. "
            "Check your key and signing method.",
        ),
        "SlowDown": (503, "Please reduce your request rate."),
        "XAmzContentSHA256Mismatch": (
            400,
            "The provided 'x-amz-content-sha256' header does not match what was computed.",
        ),
    }
)


def s3_error(code: str, message: str | None = None, **fields: object) -> S3Error:
    """An ``S3Error`` with the status (and, by default, the message) of ``code``.

    Raises ``KeyError`` for a code missing from ``CODES``: every code the
    gateway sends is listed there, so a typo fails in tests, not in production.
    """
    status, default = CODES[code]
    return S3Error(code, message if message is not None else default, status, **fields)


# The one table: lakemount category -> S3 code.
CATEGORY_CODES: Mapping[type[lm.LakeMountError], str] = MappingProxyType(
    {
        lm.NotFound: "NoSuchKey",
        # Only CreateBucket can meet an existing name, and the gateway's caller
        # is, to S3 clients, the owner of every repository it can see.
        lm.AlreadyExists: "BucketAlreadyOwnedByYou",
        lm.Conflict: "OperationAborted",
        lm.PreconditionFailed: "PreconditionFailed",
        lm.InvalidArgument: "InvalidArgument",
        lm.ReadOnly: "AccessDenied",
        lm.PermissionDenied: "AccessDenied",  # branch protection, a pre-hook's rejection
        lm.Corrupt: "InternalError",
        lm.Unavailable: "ServiceUnavailable",
    }
)


def from_lakemount(err: lm.LakeMountError, **fields: object) -> S3Error:
    """Translate a lakemount error into the ``S3Error`` to send.

    The message is the error's own (it names the repository, ref or key),
    except for the server's own failures (5xx: ``Corrupt``, ``Unavailable``,
    errors outside every category): they get S3's generic message and their
    text -- a database driver's host and user, a stored object's name -- goes
    to the server log only, since any caller, even unauthenticated, can
    provoke them.  An error outside every category is an ``InternalError``.
    """
    category = lm.category_of(err)
    code = CATEGORY_CODES.get(category, "InternalError")
    if isinstance(err, lm.RepositoryNotFound):
        code = "NoSuchBucket"
        fields.setdefault("BucketName", err.repo)
    elif isinstance(err, lm.InvalidName) and err.kind in ("repository", "bucket"):
        code = "InvalidBucketName"
        fields.setdefault("BucketName", err.name)
    elif isinstance(err, lm.SourceChanged):
        # A zero-copy import whose source changed: the client's fault is nil, the server's too;
        # say what happened without the source's location (a server path).
        return s3_error(
            "InvalidObjectState",
            "The object was imported without copying and its source changed since; it must be restored or re-imported.",
            **fields,
        )
    elif isinstance(err, lm.MetadataTooLarge):
        return s3_error("MetadataTooLarge", MaxSizeAllowed=err.limit, Size=err.size)
    elif isinstance(err, lm.UploadNotFound):
        # S3's own message and fields: clients match on them, and the key is not S3's to echo here.
        return s3_error("NoSuchUpload", UploadId=err.upload_id)
    if CODES[code][0] >= 500:
        log.warning("%s withheld from the client: %s: %s", code, type(err).__name__, err)
        return s3_error(code, None, **fields)
    return s3_error(code, str(err), **fields)


def from_exception(err: BaseException, **fields: object) -> S3Error:
    """Any exception as an ``S3Error``: itself, translated, or ``InternalError``."""
    if isinstance(err, S3Error):
        return err
    if isinstance(err, lm.LakeMountError):
        return from_lakemount(err, **fields)
    return s3_error("InternalError", None, **fields)
