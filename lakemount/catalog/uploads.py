"""Direct uploads and presigned reads: clients move object data to and from the block store themselves.

lakeFS's ``getPhysicalAddress`` / ``linkPhysicalAddress`` pair: the catalog
hands out a fresh address in the repository's storage namespace (with a
presigned PUT URL when the block store presigns), the client writes the bytes
there itself, then asks to *link* the address to a path, which stages an
entry pointing at it.  ``presign_read`` is the read side (``presign=true`` on
stat and get): a presigned GET URL of an entry's data.

**Addresses.**  A handed-out address is ``data/<aa>/<64 random hex>``: the
shape of the namespace's content-addressed data objects, so garbage
collection, its trash and the readers' trash fallback treat a linked upload
like any data object (its name is random, not the bytes' SHA-256: the server
never sees the bytes; a collision with a real digest has odds of 2^-256).  The
address the client receives is ``<namespace>/data/<aa>/<name>,<deadline>.<sig>``
(lakeFS also appends a signature after a comma): ``sig`` is an HMAC-SHA256,
under a key derived from the server key, of the repository, branch, path,
address and deadline, so only an address handed out for exactly that
repository, branch and path links, and only until ``deadline``
(``LINK_SECONDS`` after it was handed out, lakeFS's 24 hours).  Anything else
is ``InvalidLinkAddress`` (400, as lakeFS answers).

**Garbage collection.**  Until it is linked nothing references the upload, and
GC collects unreferenced data objects older than its ``min_age``.  So handing
an address out also writes a marker ``_lakefs/links/<name>.<deadline>``; GC
(``lakemount.jobs.gc``) counts every object with a marker whose deadline has
not passed as referenced, and deletes the markers of passed deadlines.  An
address never linked is thus kept while it can still be linked and collected
after, like any garbage; a linked one lives as long as entries reference it.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Final

from lakemount.block.layout import DATA_PREFIX, data_address
from lakemount.block.router import presign
from lakemount.catalog.refs import RefVerbs
from lakemount.catalog.storage import join
from lakemount.errors import InvalidArgument, InvalidLinkAddress, ObjectNotFound, Unavailable
from lakemount.records import record

if TYPE_CHECKING:
    from lakemount.graveler.model import Entry, Repository
    from lakemount.graveler.ports import BlockAdapter

LINK_SECONDS: Final = 24 * 3600
LINKS_PREFIX: Final = "_lakefs/links/"
SIGNATURE_DELIMITER: Final = ","
_SUFFIX = re.compile(r"([0-9]{1,12})\.([A-Za-z0-9_-]{43})")
_NAME = re.compile(r"[0-9a-f]{64}")
_MARKER = re.compile(r"([0-9a-f]{64})\.([0-9]{1,12})")


def link_key(server_key: str | bytes) -> bytes:
    """The address-signing key: derived from (never equal to) the server key."""
    import hashlib
    import hmac  # signing and verifying addresses only: not every verb's start

    raw = server_key.encode() if isinstance(server_key, str) else server_key
    return hmac.new(raw, b"lakemount link address signing v1", hashlib.sha256).digest()


def parse_marker(name: str) -> tuple[str, int] | None:
    """``(data object name, deadline)`` of a marker's file name under ``_lakefs/links/``; None if it is not one."""
    m = _MARKER.fullmatch(name)
    return (m.group(1), int(m.group(2))) if m else None


@record(frozen=True, slots=True)
class StagingLocation:
    """lakeFS's ``StagingLocation``: the signed address to link, and a presigned PUT URL when asked for."""

    physical_address: str
    presigned_url: str | None = None
    presigned_url_expiry: int | None = None


@record(frozen=True, slots=True)
class Linked:
    """An upload verified for linking: its namespace-relative address, size and ETag."""

    address: str
    size: int
    etag: str


def _sign(key: bytes, repo: str, branch: str, path: str, address: str, deadline: int) -> str:
    import base64
    import hashlib
    import hmac

    msg = json.dumps([repo, branch, path, address, deadline], ensure_ascii=True).encode()
    return base64.urlsafe_b64encode(hmac.new(key, msg, hashlib.sha256).digest()).rstrip(b"=").decode()


class UploadVerbs(RefVerbs):
    """Handing out addresses, linking them, presigning reads (part of ``Catalog``)."""

    adapter: BlockAdapter
    _link_key: Callable[[], bytes] | None

    if TYPE_CHECKING:
        def physical_url(self, repo: Repository, address: str) -> str: ...
        def check_source(self, entry: Entry) -> None: ...

    def _key(self) -> bytes:
        if self._link_key is None:
            raise Unavailable("linking uploads needs a catalog built with the server key")
        return self._link_key()

    def can_presign(self, repo: Repository) -> bool:
        """Whether the block store of ``repo``'s storage namespace hands out presigned URLs."""
        return presign(self.adapter, join(repo.storage_namespace, data_address("0" * 64)), "GET") is not None

    def _presigned(self, repo: Repository, url: str, method: str) -> tuple[str, float]:
        signed = presign(self.adapter, url, method)
        if signed is None:
            scheme = repo.storage_namespace.split("://", 1)[0]
            raise InvalidArgument(
                f"presigned URLs are not supported for repository {repo.name}: its {scheme}:// block store "
                "does not hand them out (send the data through the API instead, with presign=false)"
            )
        return signed

    def presign_read(self, repo: Repository, entry: Entry) -> tuple[str, float]:
        """A presigned GET URL of ``entry``'s data and the time it expires.

        Raises ``InvalidArgument`` when the block store does not presign or the
        entry has no data object (a directory marker, a symbolic link, an empty
        object), ``SourceChanged`` for an imported object whose source changed.
        """
        if entry.is_dir or entry.is_symlink or not entry.address or entry.size == 0:
            raise InvalidArgument("the object has no data to presign")
        self.check_source(entry)
        return self._presigned(repo, self.physical_url(repo, entry.address), "GET")

    def issue_link_address(self, repo: str, branch: str, path: str, *, presigned: bool,
                           now: float | None = None) -> StagingLocation:
        """A fresh address in ``repo``'s namespace for an object at ``path`` on ``branch``, signed for linking.

        With ``presigned``, also a presigned PUT URL of it.  Raises
        ``RepositoryNotFound``, ``BranchNotFound``, ``ReadOnlyRef``,
        ``ProtectedBranch`` (nothing could be linked there), ``InvalidArgument``
        when ``presigned`` and the block store does not presign, and what the
        block store raises writing the marker that keeps the upload from GC.
        """
        r = self.repository(repo)
        self.writable_branch(repo, branch)
        name = os.urandom(32).hex()  # secrets.token_hex(32), without importing secrets
        address = data_address(name)
        url = self.physical_url(r, address)
        put: tuple[str, float] | None = self._presigned(r, url, "PUT") if presigned else None
        deadline = int(time.time() if now is None else now) + LINK_SECONDS
        self.adapter.put(join(r.storage_namespace, f"{LINKS_PREFIX}{name}.{deadline}"), b"")
        sig = _sign(self._key(), repo, branch, path, address, deadline)
        return StagingLocation(
            physical_address=f"{url}{SIGNATURE_DELIMITER}{deadline}.{sig}",
            presigned_url=put[0] if put else None,
            presigned_url_expiry=int(put[1]) if put else None,
        )

    def verify_link(self, repo: str, branch: str, path: str, signed_address: str, *, size: int, checksum: str,
                    now: float | None = None) -> Linked:
        """Check that ``signed_address`` was handed out for ``repo``/``branch``/``path`` and may still be linked,
        and that the object there holds ``size`` bytes with ETag ``checksum`` (when the store knows ETags).

        Raises ``InvalidLinkAddress`` (not ours, forged, for another repository,
        branch or path, expired), ``ObjectNotFound`` if nothing was uploaded
        there, ``InvalidArgument`` for a wrong size or checksum.
        """
        r = self.repository(repo)
        data_root = join(r.storage_namespace, DATA_PREFIX)
        if not signed_address.startswith(data_root):
            raise InvalidLinkAddress(signed_address, f"not in the storage namespace of repository {repo}")
        url, sep, suffix = signed_address.rpartition(SIGNATURE_DELIMITER)
        m = _SUFFIX.fullmatch(suffix)
        if not sep or m is None:
            raise InvalidLinkAddress(signed_address, "not signed (link only addresses getPhysicalAddress handed out)")
        address = url[len(r.storage_namespace.rstrip("/")) + 1 :]
        name = address.rsplit("/", 1)[-1]
        if address != data_address(name) or _NAME.fullmatch(name) is None:
            raise InvalidLinkAddress(signed_address, "not an address lakemount hands out")
        deadline = int(m.group(1))
        expected = _sign(self._key(), repo, branch, path, address, deadline)
        import hmac

        if not hmac.compare_digest(expected, m.group(2)):
            raise InvalidLinkAddress(signed_address, f"bad signature (not handed out for {repo}/{branch}/{path})")
        if (time.time() if now is None else now) > deadline:
            raise InvalidLinkAddress(signed_address, "expired")
        if size < 0:
            raise InvalidArgument(f"size_bytes must not be negative, got {size}")
        try:
            info = self.adapter.stat(url)
        except ObjectNotFound:
            raise ObjectNotFound(f"nothing was uploaded to {url}") from None
        if info.size != size:
            raise InvalidArgument(f"size_bytes is {size} but the object at {url} has {info.size} bytes")
        stated = checksum.strip().strip('"').lower()
        if not stated:
            raise InvalidArgument("checksum is required")
        if info.etag and info.etag.lower() != stated:
            raise InvalidArgument(f"checksum {stated!r} does not match the uploaded object's ETag {info.etag!r}")
        return Linked(address, size, info.etag.lower() or stated)
