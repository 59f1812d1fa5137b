"""AWS Signature Version 2 for the S3 gateway (``AWS id:sig`` and query auth).

Old tools (s3cmd, some Hadoop and Java SDK v1 setups, ``signature_version='s3'``
in botocore) still sign this way.  The string to sign is::

    VERB \\n Content-MD5 \\n Content-Type \\n Date-or-Expires \\n
    x-amz-* headers, lower-cased and sorted, ``name:v1,v2`` one per line
    /bucket/path?sub-resources

The canonical resource always names the bucket, also for virtual-hosted-style
requests (the caller passes the bucket taken from the Host header), and keeps
only the sub-resources S3 signs (``?uploads``, ``?partNumber=``, ``?uploadId=``,
``response-*`` overrides, ...), decoded and sorted by name.  Query auth may carry
``x-amz-*``, ``Content-Type`` and ``Content-MD5`` as query parameters (botocore
puts them there); they are signed as if they were headers.

As in :mod:`~lakemount.gateway.sig.v4`, encoding details clients disagree on are tried both ways;
every candidate commits to the same request bytes.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from urllib.parse import quote, unquote_to_bytes

from lakemount.gateway.errors import s3_error
from lakemount.gateway.sig.clock import MAX_SKEW, iso_time, now_utc, request_time
from lakemount.gateway.sig.payload import body_plan
from lakemount.gateway.sig.request import HttpRequest, SecretLookup, decode_component, first, lookup_secret
from lakemount.gateway.sig.result import AuthResult, AuthScheme

# Sub-resources botocore signs (HmacV1Auth.QSAOfInterest), a superset of the
# list in S3's SigV2 documentation below.
SUBRESOURCES: frozenset[str] = frozenset(
    {
        "accelerate", "acl", "analytics", "cors", "defaultObjectAcl", "delete", "inventory", "lifecycle",
        "location", "logging", "metrics", "notification", "object-lock", "partNumber", "policy", "replication",
        "requestPayment", "response-cache-control", "response-content-disposition", "response-content-encoding",
        "response-content-language", "response-content-type", "response-expires", "restore", "select",
        "select-type", "storageClass", "tagging", "torrent", "uploadId", "uploads", "versionId", "versioning",
        "versions", "website",
    }
)  # fmt: skip
# S3's documented list; clients written from the documentation sign only these.
DOCUMENTED_SUBRESOURCES: frozenset[str] = frozenset(
    {
        "acl", "cors", "delete", "lifecycle", "location", "logging", "notification", "partNumber", "policy",
        "requestPayment", "response-cache-control", "response-content-disposition", "response-content-encoding",
        "response-content-language", "response-content-type", "response-expires", "restore", "tagging", "torrent",
        "uploadId", "uploads", "versionId", "versioning", "versions", "website",
    }
)  # fmt: skip

_QUERY_AUTH_PARAMS = frozenset({"AWSAccessKeyId", "Signature", "Expires"})


def canonical_resource(
    raw_path: str, raw_query: str, *, bucket: str | None = None, subresources: frozenset[str] = SUBRESOURCES
) -> str:
    """``/bucket/path?sub=value&...`` as SigV2 signs it, path as sent on the wire."""
    resource = (f"/{bucket}" if bucket else "") + (raw_path or "/")
    kept = []
    for part in raw_query.split("&"):
        raw_name, has_value, raw_value = part.partition("=")
        name = decode_component(raw_name)
        if name in subresources:
            # "?uploads" and "?uploads=" sign differently, so keep which it was.
            kept.append((name, f"{name}={decode_component(raw_value)}" if has_value else name))
    if kept:
        # Sorted by name only (stable): repeated names keep their order.
        kept.sort(key=lambda item: item[0])
        resource += "?" + "&".join(text for _, text in kept)
    return resource


def canonical_amz_headers(pairs: Iterable[tuple[str, str]]) -> str:
    """``x-amz-name:v1,v2\\n`` per header, names lower-cased and sorted."""
    grouped: dict[str, list[str]] = {}
    for name, value in pairs:
        lname = name.lower().strip()
        if lname.startswith("x-amz-"):
            grouped.setdefault(lname, []).append(value.strip())
    return "".join(f"{name}:{','.join(grouped[name])}\n" for name in sorted(grouped))


def string_to_sign(method: str, content_md5: str, content_type: str, date: str, amz_headers: str, resource: str) -> str:
    """The SigV2 string to sign from its canonical parts."""
    return f"{method}\n{content_md5}\n{content_type}\n{date}\n{amz_headers}{resource}"


def sign(secret: str, sts: str) -> str:
    """Base64 HMAC-SHA1 of the string to sign."""
    return base64.b64encode(
        hmac.new(secret.encode(), sts.encode("utf-8", "surrogateescape"), hashlib.sha1).digest()
    ).decode()


def _resources(request: HttpRequest, bucket: str | None) -> list[str]:
    paths = [request.path or "/"]
    normalised = quote(unquote_to_bytes(request.path or "/"), safe="/~")
    if normalised not in paths:
        paths.append(normalised)
    if bucket is None and paths[0].count("/") == 1 and paths[0] != "/":
        # A path-style request on a bucket itself signs "/bucket/" (S3's rule,
        # which botocore follows) though "/bucket" went on the wire.
        paths.append(paths[0] + "/")
    out: list[str] = []
    for path in paths:
        for subs in (SUBRESOURCES, DOCUMENTED_SUBRESOURCES):
            r = canonical_resource(path, request.query, bucket=bucket, subresources=subs)
            if r not in out:
                out.append(r)
    return out


def _check(
    request: HttpRequest,
    lookup: SecretLookup,
    provided: str,
    access_key_id: str,
    md5: str,
    ctype: str,
    dates: list[str],
    amz: str,
    bucket: str | None,
) -> None:
    """Check ``provided`` against the signatures of the request's candidate strings to sign, with the key's secret.

    Raises ``S3Error`` InvalidAccessKeyId for an unknown key, SignatureDoesNotMatch when none matches.
    """
    secret = lookup_secret(lookup, access_key_id)
    first_sts = None
    for date in dates:
        for resource in _resources(request, bucket):
            sts = string_to_sign(request.method, md5, ctype, date, amz, resource)
            first_sts = first_sts or sts
            if hmac.compare_digest(sign(secret, sts).encode(), provided.encode("utf-8", "surrogateescape")):
                return
    raise s3_error(
        "SignatureDoesNotMatch",
        AWSAccessKeyId=access_key_id,
        StringToSign=first_sts,
        SignatureProvided=provided,
        StringToSignBytes=" ".join(f"{b:02x}" for b in (first_sts or "").encode("utf-8", "surrogateescape")),
    )


def _content_sha256(headers: Mapping[str, list[str]]) -> str | None:
    value = first(headers, "x-amz-content-sha256")
    return value.strip() if value is not None else None


def verify_header(
    request: HttpRequest, lookup: SecretLookup, *, now: datetime | None = None, bucket: str | None = None
) -> AuthResult:
    """Verify ``Authorization: AWS <access key id>:<signature>``.

    ``bucket`` is the bucket of a virtual-hosted-style request (None for
    path-style).  Raises ``S3Error``: AuthorizationHeaderMalformed, AccessDenied
    (no usable date), RequestTimeTooSkewed, InvalidAccessKeyId,
    SignatureDoesNotMatch.
    """
    headers = request.header_map()
    auth = (first(headers, "authorization") or "").strip()
    scheme, _, credential = auth.partition(" ")
    access_key_id, sep, provided = credential.strip().rpartition(":")
    if scheme != "AWS" or not sep or not access_key_id or not provided:
        raise s3_error("AuthorizationHeaderMalformed", 'Expected "AWS <AWSAccessKeyId>:<Signature>"')
    when = request_time(headers)
    if when is None:
        raise s3_error("AccessDenied", "AWS authentication requires a valid Date or x-amz-date header")
    server = now_utc(now)
    if abs(server - when[0]) > MAX_SKEW:
        raise s3_error(
            "RequestTimeTooSkewed",
            RequestTime=iso_time(when[0]),
            ServerTime=iso_time(server),
            MaxAllowedSkewMilliseconds=int(MAX_SKEW.total_seconds() * 1000),
        )
    date_header = (first(headers, "date") or "").strip()
    # S3 signs an empty Date line when x-amz-date is set; some clients sign the
    # Date header anyway.
    dates = ["", date_header] if "x-amz-date" in headers else [date_header]
    _check(
        request,
        lookup,
        provided,
        access_key_id,
        (first(headers, "content-md5") or "").strip(),
        (first(headers, "content-type") or "").strip(),
        dates,
        canonical_amz_headers(request.headers),
        bucket,
    )
    return AuthResult(access_key_id, AuthScheme.SIGV2_HEADER, body_plan(headers, _content_sha256(headers), None))


def verify_query(
    request: HttpRequest, lookup: SecretLookup, *, now: datetime | None = None, bucket: str | None = None
) -> AuthResult:
    """Verify ``?AWSAccessKeyId=...&Expires=...&Signature=...``.

    Raises ``S3Error``: AuthorizationQueryParametersError (missing or bad
    parameters), AccessDenied ("Request has expired"), InvalidAccessKeyId,
    SignatureDoesNotMatch.
    """
    headers = request.header_map()
    params: dict[str, str] = {}
    amz_from_query: dict[str, str] = {}
    for name, value in request.query_pairs():
        if name in _QUERY_AUTH_PARAMS:
            params.setdefault(name, value)
        else:
            lname = name.lower()
            if lname.startswith("x-amz-"):
                amz_from_query.setdefault(lname, value)
            elif lname in ("content-type", "content-md5") and lname not in headers:
                params.setdefault(lname, value)
    # A presigned URL's x-amz-* parameters stand for headers; where the client
    # also sent the header, the signed URL's value is the one that was signed.
    amz_pairs = [(n, v) for n, v in request.headers if n.lower() not in amz_from_query]
    amz_pairs += amz_from_query.items()
    if any(p not in params for p in _QUERY_AUTH_PARAMS):
        raise s3_error(
            "AuthorizationQueryParametersError",
            "Query-string authentication requires the Signature, Expires and AWSAccessKeyId parameters",
        )
    expires_text = params["Expires"].strip()
    if not expires_text.isdigit() or not expires_text.isascii():
        raise s3_error("AuthorizationQueryParametersError", "Expires must be a number of seconds since the epoch")
    expires = int(expires_text)
    server = now_utc(now)
    if server.timestamp() > expires:
        raise s3_error(
            "AccessDenied",
            "Request has expired",
            Expires=iso_time(datetime.fromtimestamp(expires, UTC)),
            ServerTime=iso_time(server),
        )
    access_key_id = params["AWSAccessKeyId"]
    # Base64 has '+' but no spaces: a space can only be a '+' decoded as a form.
    provided = params["Signature"].replace(" ", "+")
    _check(
        request,
        lookup,
        provided,
        access_key_id,
        (first(headers, "content-md5") or params.get("content-md5", "")).strip(),
        (first(headers, "content-type") or params.get("content-type", "")).strip(),
        [expires_text],
        canonical_amz_headers(amz_pairs),
        bucket,
    )
    return AuthResult(access_key_id, AuthScheme.SIGV2_QUERY, body_plan(headers, _content_sha256(headers), None))


__all__ = [
    "DOCUMENTED_SUBRESOURCES",
    "SUBRESOURCES",
    "canonical_amz_headers",
    "canonical_resource",
    "sign",
    "string_to_sign",
    "verify_header",
    "verify_query",
]
