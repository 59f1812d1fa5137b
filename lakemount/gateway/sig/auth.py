"""``authenticate``: one S3 request, signed any way the gateway accepts, to an ``AuthResult``.

Picks the scheme from the ``Authorization`` header or the query (SigV4 in
:mod:`~lakemount.gateway.sig.v4`, SigV2 in :mod:`~lakemount.gateway.sig.v2`)
and refuses requests that carry two, or none.
"""

from __future__ import annotations

from datetime import datetime

from lakemount.gateway.errors import s3_error
from lakemount.gateway.sig import v2, v4
from lakemount.gateway.sig.request import HttpRequest, SecretLookup, first
from lakemount.gateway.sig.result import AuthResult


def mechanisms(request: HttpRequest) -> tuple[str | None, bool, bool]:
    """How a request claims to be signed: its Authorization header, a presigned SigV4 query, a presigned SigV2 query.

    The header is None when absent or blank: an empty header signs nothing, the
    request is anonymous, as S3 treats it.
    """
    auth = first(request.header_map(), "authorization")
    if auth is not None and not auth.strip():
        auth = None
    params = request.query_names()
    presigned_v4 = "X-Amz-Algorithm" in params or "X-Amz-Credential" in params
    presigned_v2 = "AWSAccessKeyId" in params and "Signature" in params
    return auth, presigned_v4, presigned_v2


def is_signed(request: HttpRequest) -> bool:
    """Whether a request carries any signature (header or presigned query); unsigned ones are anonymous."""
    auth, presigned_v4, presigned_v2 = mechanisms(request)
    return auth is not None or presigned_v4 or presigned_v2


def authenticate(
    request: HttpRequest,
    lookup: SecretLookup,
    *,
    now: datetime | None = None,
    region: str | None = None,
    virtual_host_bucket: str | None = None,
    claimed: tuple[str | None, bool, bool] | None = None,
) -> AuthResult:
    """Authenticate an S3 request signed any way the gateway accepts.

    SigV4 header or presigned query, or SigV2 header or query.  A request with
    no signature at all (an empty ``Authorization`` header included) is refused
    with ``AccessDenied``.  ``virtual_host_bucket`` is the bucket taken from the Host
    header of a virtual-hosted-style request: SigV2 signs it as part of the path.
    ``region``, if given, is enforced on SigV4 credential scopes.  Raises
    ``S3Error`` only; errors of ``lookup`` other than "not found" propagate.  ``claimed``: what
    :func:`mechanisms` said of this request, when the caller asked it already (not asked again).
    """
    auth, presigned_v4, presigned_v2 = claimed if claimed is not None else mechanisms(request)
    if auth is not None and (presigned_v4 or presigned_v2):
        raise s3_error(
            "InvalidArgument",
            "Only one auth mechanism allowed; only the X-Amz-Algorithm query parameter, Signature query "
            "string parameter or the Authorization header should be specified",
            ArgumentName="Authorization",
        )
    if auth is not None:
        scheme = auth.strip().split(" ", 1)[0]
        if scheme in (v4.ALGORITHM, v4.ECDSA_ALGORITHM):
            return v4.verify_header(request, lookup, now=now, region=region)
        if scheme == "AWS":
            return v2.verify_header(request, lookup, now=now, bucket=virtual_host_bucket)
        raise s3_error("InvalidArgument", "Unsupported Authorization Type", ArgumentName="Authorization")
    if presigned_v4:
        return v4.verify_query(request, lookup, now=now, region=region)
    if presigned_v2:
        return v2.verify_query(request, lookup, now=now, bucket=virtual_host_bucket)
    raise s3_error("AccessDenied", "Anonymous access is not allowed: sign the request with an access key")
