"""What an operation receives: the request, who sent it, the bucket, and the services.

``Ctx`` is built by the dispatcher (``handler.py``) for one request; the
operations under ``operations/`` use it to resolve buckets and keys, check
permissions and reach the few ``Services`` they may use (the catalog, access
control, the bucket map, the multipart store, the settings) -- not the
gateway object, nor the ``App`` behind it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from lakemount.audit.context import note
from lakemount.auth.policies import Action
from lakemount.catalog.catalog import Catalog, encode_new_path
from lakemount.catalog.model import ResolvedRef
from lakemount.catalog.paths import printable
from lakemount.catalog.s3state import MultipartStore
from lakemount.errors import NotFound
from lakemount.gateway.access import Access, Principal
from lakemount.gateway.buckets import BucketMap, Target
from lakemount.gateway.errors import S3Error, s3_error
from lakemount.gateway.kept import KeptReads
from lakemount.gateway.objects import decoder_for
from lakemount.gateway.settings import GatewaySettings
from lakemount.serving.http import Request

_ANONYMOUS_ACTIONS = {
    "public-read": {Action.READ_REPO},
    "public-read-write": {Action.READ_REPO, Action.WRITE_REPO},
}


@dataclass(frozen=True, slots=True)
class Services:
    """What the operations may use, and all they may use; built once per gateway process."""

    catalog: Catalog
    access: Access
    buckets: BucketMap
    uploads: MultipartStore
    settings: GatewaySettings

    @property
    def kept(self) -> KeptReads:
        """What GET and HEAD reuse between requests: the bucket map's (repository records among it)."""
        return self.buckets.kept


@dataclass
class Ctx:
    """One request as an operation sees it; ``target()`` is resolved once, on first use."""

    services: Services
    req: Request
    principal: Principal
    bucket: str | None
    key: str | None
    request_id: str
    _target: Target | None = field(default=None, repr=False)

    @property
    def user(self) -> str:
        """The user id ("" for anonymous), as recorded in owners and committers."""
        return self.principal.user_id or ""

    @property
    def query(self) -> dict[str, str]:
        return self.req.query

    def target(self, *, read: bool = False) -> Target:
        """The bucket's target; raises NoSuchBucket.  ``read``: the request only reads objects (see ``BucketMap.resolve``)."""
        if self._target is None:
            assert self.bucket is not None
            self._target = self.services.buckets.resolve(self.bucket, read=read)
        return self._target

    def allowed(self, action: Action, repo: str = "*") -> bool:
        if self.principal.anonymous:
            return False
        assert self.principal.user_id is not None
        return self.services.access.allowed(self.principal.user_id, action, repo)

    def require(self, action: Action, target: Target | None = None) -> None:
        """Raise AccessDenied unless the caller may do ``action`` on the target's repository.

        Anonymous callers get what the bucket's canned ACL grants.
        """
        if target is None and action is Action.CREATE_REPO:
            if not self.allowed(action, "*" if self.bucket is None else self.bucket):
                raise s3_error("AccessDenied")
            return
        t = target or self.target()
        if self.principal.anonymous:
            if action in _ANONYMOUS_ACTIONS.get(t.acl, ()):
                return
            raise s3_error("AccessDenied")
        if not self.allowed(action, t.repo.name):
            raise s3_error("AccessDenied")

    def read_body(self, limit: int) -> bytes:
        """The whole (small) request body, verified like any upload; raises MalformedXML past ``limit``."""
        decoder = decoder_for(self.req, self.principal.auth)
        out = bytearray()
        while True:
            raw = self.req.body.read()
            if not raw:
                break
            out += decoder.feed(raw)
            if len(out) > limit:
                raise s3_error("MalformedXML", "The XML you provided was larger than the maximum allowed size.")
        decoder.finish()
        return bytes(out)

    def resolve_ref(self, target: Target, ref: str, key: str | None = None) -> ResolvedRef:
        """A ref of the target's repository; raises NoSuchKey naming the ref for an unknown one.

        The message says it is the ref that is missing, so a mistyped branch
        (``s3://repo/mian/x``) reads as such, as it does for a write.
        """
        try:
            resolved = self.services.catalog.resolve(target.repo, ref)
        except NotFound:
            raise self.no_such_ref(target, ref, key) from None
        note(ref=ref, commit=resolved.commit_id)
        return resolved

    def no_such_ref(self, target: Target, ref: str, key: str | None = None) -> S3Error:
        """NoSuchKey naming ``ref`` as what is missing (see ``resolve_ref``)."""
        return s3_error(
            "NoSuchKey", f"no branch, tag or commit {ref!r} in repository {target.repo.name}", Key=key or self.key or ""
        )

    def object_path(self, target: Target, key: str) -> tuple[str, str]:
        """(ref, path) of an object key; raises NoSuchKey when the key names no path."""
        ref, path = target.split(key)
        if not ref or not path:
            raise s3_error("NoSuchKey", Key=key)
        return ref, path

    def write_path(self, target: Target, key: str, *, new: bool = False) -> tuple[str, str]:
        """(branch, path) to write an object key to; raises when it names no writable path.

        ``new``: the write stores an object there, so the catalog's key rule
        applies before any body is read (``InvalidArgument`` for a key that is
        not UTF-8 text); deletes take any stored key.
        """
        ref, path = target.split(key)
        if not ref or not path:
            raise s3_error(
                "InvalidRequest",
                f"key {printable(key)!r} must be <ref>/<path> in bucket {target.bucket} (a branch, then the object's path)",
            )
        if new:
            encode_new_path(path)
        return self.writable_branch(target, ref, key), path

    def writable_branch(self, target: Target, ref: str, key: str) -> str:
        """The branch a write of ``key`` goes to; NoSuchKey naming the branch if there is none."""
        catalog = self.services.catalog
        repo = target.repo.name
        # A branch this process has read is not resolved again (``Catalog.writable_branch`` keeps the name): the
        # head the audit record names is the one its last read found.  Anything else is resolved, once.
        seen = catalog.branch_seen(repo, ref)
        try:
            if seen is not None:
                branch = catalog.writable_branch(repo, ref)
                note(ref=ref, commit=seen[0].commit_id)
                return branch
            resolved = catalog.resolve(target.repo, ref)
            note(ref=ref, commit=resolved.commit_id)
            return catalog.writable_branch(repo, resolved)
        except NotFound:
            raise s3_error("NoSuchKey", f"no branch {ref!r} in repository {repo}", Key=key) from None


def not_implemented(what: str) -> S3Error:
    """``NotImplemented`` naming the unsupported feature."""
    return s3_error("NotImplemented", f"{what} is not implemented by the lakemount gateway")
