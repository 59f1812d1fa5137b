"""AWS Signature Version 4: ``verify_header`` (``Authorization: AWS4-HMAC-SHA256 ...``) and ``verify_query`` (presigned URLs).

Both check the credential scope, the signing time and the signature of the
canonical request (:mod:`~lakemount.gateway.sig.canonical`), and return an
``AuthResult`` whose body plan carries the seed signature of a signed
streaming upload.  Clients disagree on the finer points of encoding (``+`` in
a query, characters they leave unencoded in a path), so the verifier also
tries the request exactly as sent; every candidate commits to the same bytes
on the wire, so accepting any of them admits no other request.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from lakemount.gateway.errors import s3_error
from lakemount.gateway.sig.canonical import canonical_query, canonical_request, raw_sorted_query, uri_encode_path
from lakemount.gateway.sig.clock import AMZ_DATE_FORMAT, MAX_SKEW, iso_time, now_utc, parse_amz_date, request_time
from lakemount.gateway.sig.payload import EMPTY_SHA256, UNSIGNED_PAYLOAD, ChunkSigning, body_plan
from lakemount.gateway.sig.request import HttpRequest, SecretLookup, first, lookup_secret, signatures_equal
from lakemount.gateway.sig.result import AuthResult, AuthScheme

ALGORITHM = "AWS4-HMAC-SHA256"
ECDSA_ALGORITHM = "AWS4-ECDSA-P256-SHA256"  # SigV4a: recognised, not supported
TERMINATOR = "aws4_request"
SERVICE = "s3"
MAX_PRESIGN_EXPIRES = 7 * 24 * 3600


def string_to_sign(amz_date: str, scope: str, canonical: str) -> str:
    """The SigV4 string to sign for a canonical request."""
    return "\n".join(
        [ALGORITHM, amz_date, scope, hashlib.sha256(canonical.encode("utf-8", "surrogateescape")).hexdigest()]
    )


@functools.lru_cache(maxsize=256)
def signing_key(secret: str, date: str, region: str, service: str = SERVICE) -> bytes:
    """The SigV4 key for one day, region and service.

    Kept for the next requests of the same key that day (as AWS's own SDKs
    keep it): four HMACs less per request on the gateway's hot path.  A
    revoked key is refused before this is asked (its secret is looked up first).
    """
    key = hmac.new(f"AWS4{secret}".encode(), date.encode(), hashlib.sha256).digest()
    for part in (region, service, TERMINATOR):
        key = hmac.new(key, part.encode(), hashlib.sha256).digest()
    return key


def sign(key: bytes, sts: str) -> str:
    """The hex HMAC-SHA256 of the string to sign ``sts`` under the derived signing ``key``."""
    return hmac.new(key, sts.encode(), hashlib.sha256).hexdigest()


@dataclass(frozen=True, slots=True)
class _Scope:
    access_key_id: str
    date: str
    region: str
    service: str

    @property
    def text(self) -> str:
        return f"{self.date}/{self.region}/{self.service}/{TERMINATOR}"


def _parse_credential(credential: str, error: str, region: str | None) -> _Scope:
    parts = credential.rsplit("/", 4)
    if len(parts) != 5 or not parts[0] or not re.fullmatch(r"\d{8}", parts[1]):
        raise s3_error(
            error,
            'Error parsing the Credential; expecting "<YOUR-AKID>/YYYYMMDD/REGION/SERVICE/aws4_request".',
        )
    akid, date, req_region, service, terminator = parts
    if terminator != TERMINATOR:
        raise s3_error(error, f"Incorrect terminal '{terminator}'. This endpoint uses '{TERMINATOR}'.")
    if service != SERVICE:
        raise s3_error(error, f"Incorrect service '{service}'. This endpoint belongs to '{SERVICE}'.")
    if region is not None and req_region != region:
        raise s3_error(error, f"The region '{req_region}' is wrong; expecting '{region}'", Region=region)
    return _Scope(akid, date, req_region, service)


def _candidates(request: HttpRequest, exclude_param: str | None) -> Iterator[tuple[str, str]]:
    """The (canonical URI, canonical query) forms a client may have signed, AWS's own first, each once.

    Made as they are tried: a request signed AWS's way (every SDK) costs one canonical query, not
    the three made before any was tried (stop 57); one signed another way is tried against the same
    candidates as before (the query forms outermost now), and a failure still reports the first.
    """
    uris = [uri_encode_path(request.path)]
    if request.path and request.path not in uris:
        uris.append(request.path)
    queries = [canonical_query(request.query, exclude=exclude_param)]
    for uri in uris:
        yield uri, queries[0]
    for make in (
        lambda: canonical_query(request.query, exclude=exclude_param, plus_is_space=True),
        lambda: raw_sorted_query(request.query, exclude_param),
    ):
        alt = make()
        if alt in queries:
            continue
        queries.append(alt)
        for uri in uris:
            yield uri, alt


def _check_signature(
    *,
    request: HttpRequest,
    headers: Mapping[str, list[str]],
    scope: _Scope,
    amz_date: str,
    signed: Sequence[str],
    payload: str,
    provided: str,
    lookup: SecretLookup,
    exclude_param: str | None,
) -> bytes:
    """Check ``provided`` against the signatures of the request's candidate canonical forms; returns the signing key.

    Raises ``S3Error`` InvalidAccessKeyId for an unknown key, SignatureDoesNotMatch when none matches.
    """
    secret = lookup_secret(lookup, scope.access_key_id)
    key = signing_key(secret, scope.date, scope.region, scope.service)
    first_candidate: tuple[str, str] | None = None
    for uri, query in _candidates(request, exclude_param):
        creq = canonical_request(request.method, uri, query, headers, signed, payload)
        sts = string_to_sign(amz_date, scope.text, creq)
        if signatures_equal(sign(key, sts), provided):
            return key
        if first_candidate is None:
            first_candidate = (creq, sts)
    assert first_candidate is not None
    creq, sts = first_candidate
    raise s3_error(
        "SignatureDoesNotMatch",
        AWSAccessKeyId=scope.access_key_id,
        StringToSign=sts,
        SignatureProvided=provided,
        CanonicalRequest=creq,
    )


def _signed_header_list(text: str, error: str) -> list[str]:
    names = [n.strip().lower() for n in text.split(";")]
    if not names or any(not n for n in names):
        raise s3_error(error, "SignedHeaders is malformed.")
    if "host" not in names:
        raise s3_error(error, "SignedHeaders must include host.")
    return names


def verify_header(
    request: HttpRequest,
    lookup: SecretLookup,
    *,
    now: datetime | None = None,
    region: str | None = None,
) -> AuthResult:
    """Verify a request signed with an ``Authorization: AWS4-HMAC-SHA256 ...`` header.

    ``region``, when given, is the only region accepted in the credential scope.
    Raises ``S3Error``: AuthorizationHeaderMalformed, AccessDenied (no usable
    date, or x-amz-* headers left unsigned), RequestTimeTooSkewed,
    InvalidAccessKeyId, SignatureDoesNotMatch, InvalidArgument, NotImplemented.
    """
    headers = request.header_map()
    auth = (first(headers, "authorization") or "").strip()
    algorithm, _, rest = auth.partition(" ")
    if algorithm == ECDSA_ALGORITHM:
        raise s3_error("NotImplemented", "Signature Version 4A is not supported")
    if algorithm != ALGORITHM:
        raise s3_error("AuthorizationHeaderMalformed", f"Unsupported algorithm {algorithm!r}")
    fields: dict[str, str] = {}
    for part in rest.split(","):
        name, sep, value = part.strip().partition("=")
        if sep:
            fields[name.strip()] = value.strip()
    missing = [k for k in ("Credential", "SignedHeaders", "Signature") if k not in fields]
    if missing:
        raise s3_error("AuthorizationHeaderMalformed", f"The authorization header is malformed; missing {missing[0]}.")
    scope = _parse_credential(fields["Credential"], "AuthorizationHeaderMalformed", region)
    signed = _signed_header_list(fields["SignedHeaders"], "AuthorizationHeaderMalformed")

    when = request_time(headers)
    if when is None:
        raise s3_error("AccessDenied", "AWS authentication requires a valid Date or x-amz-date header")
    t, amz_date = when
    if amz_date[:8] != scope.date:
        raise s3_error("AuthorizationHeaderMalformed", "Invalid credential date. Date is not the same as X-Amz-Date.")
    server = now_utc(now)
    if abs(server - t) > MAX_SKEW:
        raise s3_error(
            "RequestTimeTooSkewed",
            RequestTime=iso_time(t),
            ServerTime=iso_time(server),
            MaxAllowedSkewMilliseconds=int(MAX_SKEW.total_seconds() * 1000),
        )
    unsigned = sorted(n for n in headers if n.startswith("x-amz-") and n not in signed)
    if unsigned:
        raise s3_error(
            "AccessDenied",
            "There were headers present in the request which were not signed",
            HeadersNotSigned=", ".join(unsigned),
        )

    payload = first(headers, "x-amz-content-sha256")
    if payload is None:
        # Not S3-style: the payload hash is the body's (empty if none).
        payload = hashlib.sha256(request.body()).hexdigest() if request.body is not None else EMPTY_SHA256
    else:
        payload = payload.strip()
    provided = fields["Signature"]
    key = _check_signature(
        request=request,
        headers=headers,
        scope=scope,
        amz_date=amz_date,
        signed=signed,
        payload=payload,
        provided=provided,
        lookup=lookup,
        exclude_param=None,
    )
    signing = ChunkSigning(key, amz_date, scope.text, provided.lower())
    return AuthResult(scope.access_key_id, AuthScheme.SIGV4_HEADER, body_plan(headers, payload, signing), scope.region)


_PRESIGN_PARAMS = (
    "X-Amz-Algorithm",
    "X-Amz-Credential",
    "X-Amz-Date",
    "X-Amz-Expires",
    "X-Amz-SignedHeaders",
    "X-Amz-Signature",
)


def verify_query(
    request: HttpRequest,
    lookup: SecretLookup,
    *,
    now: datetime | None = None,
    region: str | None = None,
) -> AuthResult:
    """Verify a presigned URL (``X-Amz-Algorithm=AWS4-HMAC-SHA256&...``).

    Raises ``S3Error``: AuthorizationQueryParametersError, AccessDenied
    ("Request has expired", "Request is not valid yet"), InvalidAccessKeyId,
    SignatureDoesNotMatch, NotImplemented.
    """
    headers = request.header_map()
    params: dict[str, str] = {}
    for name, value in request.query_pairs():
        params.setdefault(name, value)
    if params.get("X-Amz-Algorithm") == ECDSA_ALGORITHM:
        raise s3_error("NotImplemented", "Signature Version 4A is not supported")
    if any(p not in params for p in _PRESIGN_PARAMS):
        raise s3_error(
            "AuthorizationQueryParametersError",
            "Query-string authentication version 4 requires the X-Amz-Algorithm, X-Amz-Credential, "
            "X-Amz-Signature, X-Amz-Date, X-Amz-SignedHeaders, and X-Amz-Expires parameters.",
        )
    if params["X-Amz-Algorithm"] != ALGORITHM:
        raise s3_error("AuthorizationQueryParametersError", 'X-Amz-Algorithm only supports "AWS4-HMAC-SHA256"')
    scope = _parse_credential(params["X-Amz-Credential"], "AuthorizationQueryParametersError", region)
    signed = _signed_header_list(params["X-Amz-SignedHeaders"], "AuthorizationQueryParametersError")
    t = parse_amz_date(params["X-Amz-Date"])
    if t is None:
        raise s3_error(
            "AuthorizationQueryParametersError",
            "X-Amz-Date must be in the ISO8601 Long Format \"yyyyMMdd'T'HHmmss'Z'\"",
        )
    amz_date = t.strftime(AMZ_DATE_FORMAT)
    if amz_date[:8] != scope.date:
        raise s3_error(
            "AuthorizationQueryParametersError", "Invalid credential date. Date is not the same as X-Amz-Date."
        )
    expires_text = params["X-Amz-Expires"]
    if not expires_text.isdigit() or not expires_text.isascii():
        raise s3_error("AuthorizationQueryParametersError", "X-Amz-Expires should be a number")
    expires = int(expires_text)
    if expires > MAX_PRESIGN_EXPIRES:
        raise s3_error(
            "AuthorizationQueryParametersError", "X-Amz-Expires must be less than a week (in seconds) that is 604800"
        )
    server = now_utc(now)
    if t - server > MAX_SKEW:
        raise s3_error("AccessDenied", "Request is not valid yet", RequestTime=iso_time(t), ServerTime=iso_time(server))
    if server > t + timedelta(seconds=expires):
        raise s3_error(
            "AccessDenied",
            "Request has expired",
            **{
                "X-Amz-Expires": expires,
                "Expires": iso_time(t + timedelta(seconds=expires)),
                "ServerTime": iso_time(server),
            },
        )

    payload = params.get("X-Amz-Content-Sha256") or first(headers, "x-amz-content-sha256") or UNSIGNED_PAYLOAD
    payload = payload.strip()
    _check_signature(
        request=request,
        headers=headers,
        scope=scope,
        amz_date=amz_date,
        signed=signed,
        payload=payload,
        provided=params["X-Amz-Signature"],
        lookup=lookup,
        exclude_param="X-Amz-Signature",
    )
    # No chunk signing: a presigned URL cannot carry a seed signature.
    return AuthResult(scope.access_key_id, AuthScheme.SIGV4_QUERY, body_plan(headers, payload, None), scope.region)


def verify(
    request: HttpRequest,
    lookup: SecretLookup,
    *,
    now: datetime | None = None,
    region: str | None = None,
) -> AuthResult:
    """Verify a SigV4 request, by header or by presigned query (see those)."""
    has_header = any(n.lower() == "authorization" for n, _ in request.headers)
    return (verify_header if has_header else verify_query)(request, lookup, now=now, region=region)
