"""The object writer: the one way object data gets into a repository's storage namespace.

Every front end stores bytes through :class:`DataWriter`, made by
``Catalog.writer`` (the mount's save, the gateway's PUT, parts and multipart
completion, the API's upload, the CLI's ``fs upload``).  It is a context
manager (STYLE §7): leaving the block stores what was written and sets
:attr:`DataWriter.info` (address, size, MD5, SHA-256); an exception, or
:meth:`DataWriter.cancel`, leaves nothing visible.

Where bytes go.  By default the object is content-addressed
(:func:`~lakemount.block.layout.data_address` of its SHA-256): writing the
same bytes twice stores them once, and an object already there is kept and
refreshed against a concurrent garbage collection instead of written again.
Given an ``address`` (an upload's part, a copy across namespaces), the bytes
are stored there, replacing what was.

How bytes travel.  A body of up to ``INLINE_MAX`` bytes is held in memory
and stored with one ``put`` (a duplicate never touches a disk); a larger one
streams into a landing file (``block/landing.py``: inside a local namespace,
so storing is a rename) while a ``Pipeline`` thread hashes and writes it, so
receiving and hashing run on two cores and no body is held whole in memory.
With ``lazy`` (the mount's close without write-back) an in-memory body goes
to a store's ``put_lazily`` where it has one: on the local store it is whole
and visible at once and durable against power loss within a second (one
``syncfs`` for all stored meanwhile), not after two fsyncs of its own.
A local file the caller will not change (the mount's temp file) is uploaded
as it is, without a copy (:meth:`DataWriter.write_file`); on the local block
store, one its caller never changes again becomes the object by a hard link.

Digests.  MD5 is computed in :meth:`DataWriter.write` (the caller's thread),
SHA-256 in the pipeline; a caller that already computes one (the gateway's
body decoder computes MD5, a signed payload names its SHA-256) says so with
``hash_md5=False`` / ``hash_sha256=False`` and hands it over with
:meth:`DataWriter.vouch`, so no byte is hashed twice.
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from types import TracebackType
from typing import TYPE_CHECKING, BinaryIO, Final, Protocol

from lakemount.block.landing import Landing, Pipeline, landing
from lakemount.block.layout import DATA_PREFIX, data_address
from lakemount.block.pools import LazyPool
from lakemount.errors import ObjectNotFound

if TYPE_CHECKING:
    from lakemount.graveler.model import Repository
    from lakemount.graveler.ports import BlockAdapter

CHUNK: Final = 4 * 1024 * 1024
INLINE_MAX: Final = 256 * 1024  # bodies up to this size are stored from memory, with one put
DEFER_THREADS: Final = 8  # deferred stores (``defer``) running at once in a process
# On a store that charges and waits per request (S3), a PUT of a small body costs what the self-COPY
# that refreshes an existing copy costs: such a body is written without asking, so a new object is
# one request, not a COPY that fails and a PUT (a lone writer's cp -r paid both for every file),
# and an existing one is refreshed by the write itself (the same bytes, a new modification time,
# as the COPY gave a concurrent GC).  A local store's refresh is a utime, far cheaper than a synced
# write: it is still asked first there.
PUT_UNASKED_SCHEMES: Final = ("s3://",)
PUT_UNASKED_MAX: Final = 64 * 1024

# The threads deferred stores run on (and again in a forked child: a server's workers).
_deferred = LazyPool(DEFER_THREADS, "lakemount-store")


def content_address(sha256: str) -> str:
    """The address a content-addressed write of bytes with this SHA-256 gives them (what an entry names)."""
    return data_address(sha256)



class DataStore(Protocol):
    """What the writer (and the streamed upload, streaming.py) use of the catalog: where an address lies, whether
    a content-addressed object is there already, the block store, and where landing files go (``Catalog``)."""

    @property
    def adapter(self) -> BlockAdapter: ...

    @property
    def tmpdir(self) -> str | None: ...

    def physical_url(self, repo: Repository, address: str) -> str: ...

    def refresh_existing(self, url: str) -> bool: ...


@dataclass(frozen=True, slots=True)
class DataInfo:
    """Where written bytes went, and their digests (an empty string for a digest nobody computed)."""

    address: str
    size: int
    etag: str  # MD5 hex
    sha256: str


class DataWriter:
    """One object's data on its way into a repository's storage namespace (see the module's docstring).

    Use only as a context manager; :attr:`info` is set when the block is left
    without an exception.  Raises (on leaving) what the block adapter raises,
    ``OSError`` for a landing file that cannot be written, ``ValueError`` when
    the content address is needed and the SHA-256 was neither hashed nor vouched for.
    """

    def __init__(
        self, catalog: DataStore, repo: Repository, *, expected: int | None = None, address: str | None = None,
        hash_md5: bool = True, hash_sha256: bool = True, defer: bool = False, lazy: bool = False,
    ) -> None:
        self._catalog = catalog
        self._defer = defer
        self._lazy = lazy
        self._pending: Future[None] | None = None
        self._repo = repo
        self._expected = expected
        self._address = address
        self._md5 = hashlib.md5(usedforsecurity=False) if hash_md5 else None
        self._sha = hashlib.sha256() if hash_sha256 else None
        self._sha_fed = False  # True once the pipeline feeds ``_sha``; until then it hashes the inline body at the end
        self._vouched_md5: str | None = None
        self._vouched_sha: str | None = None
        self._inline: list[bytes] = []
        self._inline_size = 0
        self._stack = contextlib.ExitStack()
        self._land: Landing | None = None
        self._pipe: Pipeline | None = None
        self._file: str | None = None
        self._link = False
        self._cancelled = False
        self.size = 0
        self._info: DataInfo | None = None

    @property
    def info(self) -> DataInfo:
        """Where the bytes went and their digests; raises ``RuntimeError`` before the block was left
        without an error (or after :meth:`cancel`)."""
        if self._info is None:
            raise RuntimeError("the writer stored nothing (its block has not ended, failed, or was cancelled)")
        return self._info

    def stored(self) -> None:
        """Wait until the bytes are stored; raises what storing them raised.  Only a ``defer`` writer
        whose body stayed in memory stores after its block (on a thread): then :attr:`info` is known
        before the bytes are stored, and the caller stages the entry meanwhile, handing this to the
        staging as its ``ready`` (nothing is visible before it returns)."""
        if self._pending is not None:
            self._pending.result()

    # ------------------------------------------------------------------ writing
    def write(self, data: bytes | bytearray | memoryview) -> None:
        """Append ``data`` to the object; raises ``OSError`` (a full disk) from a landing file."""
        if self._file is not None:
            raise ValueError("a writer given a whole file takes no more bytes")
        if not data:
            return
        chunk = data if isinstance(data, bytes) else bytes(data)
        self.size += len(chunk)
        if self._md5 is not None:
            self._md5.update(chunk)
        if self._pipe is not None:
            self._pipe.put(chunk)
            return
        self._inline.append(chunk)
        self._inline_size += len(chunk)
        if self._inline_size > INLINE_MAX:
            self._start_landing()

    def write_from(self, stream: BinaryIO) -> None:
        """Append everything ``stream`` holds, read in chunks (never whole)."""
        while chunk := stream.read(CHUNK):
            self.write(chunk)

    def write_file(self, path: str, *, digests: tuple[int, str, str] | None = None, link: bool = False) -> None:
        """Make the local file ``path`` the object's whole body; it is uploaded itself, without a copy.

        ``digests`` is ``(size, sha256 hex, md5 hex)`` when the caller computed
        them while writing the file (then the file is not read to hash it).
        The caller guarantees the file does not change until the block ends:
        the address names the bytes that were hashed.  ``link``: it never
        changes the file again, so the local block store may make the file
        itself the object (``BlockAdapter.put_file``).  Raises ``ObjectNotFound``
        if the file is missing.
        """
        if self.size or self._file is not None:
            raise ValueError("a whole file is a writer's only body")
        if digests is None:
            digests = _hash_file(path)
        self._file = path
        self._link = link
        self.size, self._vouched_sha, self._vouched_md5 = digests

    def vouch(self, *, md5: str | None = None, sha256: str | None = None) -> None:
        """Digests (hex) the caller computed of exactly the bytes written, for those it does not let the writer hash."""
        if md5 is not None:
            self._vouched_md5 = md5
        if sha256 is not None:
            self._vouched_sha = sha256

    def cancel(self) -> None:
        """Store nothing when the block ends (the body was only read to be checked)."""
        self._cancelled = True

    # ------------------------------------------------------------------ the block
    def __enter__(self) -> DataWriter:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        with self._stack:  # on the way out, the landing file goes unless it became the object
            if self._pipe is not None:
                pipe, self._pipe = self._pipe, None
                if exc_type is None:
                    pipe.finish()  # raises the pipeline's error (a full disk)
                else:
                    with contextlib.suppress(Exception):
                        pipe.finish()  # it ends the thread; the block's own error is the one to see
            if exc_type is None and not self._cancelled:
                self._info = self._commit()

    def _start_landing(self) -> None:
        """From memory to a landing file and its pipeline, once the body outgrows ``INLINE_MAX``."""
        sub = DATA_PREFIX.rstrip("/") if self._address is None else self._address.rpartition("/")[0]
        cat = self._catalog
        self._land = self._stack.enter_context(landing(cat.physical_url(self._repo, sub), cat.tmpdir))
        self._pipe = Pipeline(self._land, self._sha, expected=self._expected)
        self._sha_fed = True
        for chunk in self._inline:
            self._pipe.put(chunk)
        self._inline, self._inline_size = [], 0

    def _commit(self) -> DataInfo:
        cat = self._catalog
        body = b"".join(self._inline) if self._land is None and self._file is None else None
        sha = self._vouched_sha
        if sha is None and self._sha is not None:
            if not self._sha_fed and body is not None:
                self._sha.update(body)
            sha = self._sha.hexdigest()
        md5 = self._vouched_md5
        if md5 is None and self._md5 is not None:
            md5 = self._md5.hexdigest()
        address = self._address
        content_addressed = address is None
        if address is None:
            if sha is None:
                raise ValueError("a content-addressed write needs the SHA-256: hash it, or vouch for it")
            address = data_address(sha)
        url = cat.physical_url(self._repo, address)
        info = DataInfo(address, self.size, md5 or "", sha or "")
        if content_addressed and self.size <= PUT_UNASKED_MAX and url.startswith(PUT_UNASKED_SCHEMES):
            content_addressed = False  # written whether it is there or not: see PUT_UNASKED_SCHEMES
        if self._defer and body is not None:
            self._pending = _deferred.get().submit(self._store_body, url, body, content_addressed)
        elif content_addressed and cat.refresh_existing(url):
            pass  # the same bytes are there already: only their time was refreshed
        elif self._file is not None:
            cat.adapter.put_file(url, self._file, link=self._link)
        elif self._land is not None:
            self._land.store(cat.adapter, url)
        else:
            assert body is not None
            self._store_body(url, body, False)
        return info

    def _store_body(self, url: str, body: bytes, content_addressed: bool) -> None:
        """Store an in-memory body at ``url`` (on a pool thread when deferred); a content-addressed one
        that is already there is only refreshed."""
        cat = self._catalog
        if content_addressed and cat.refresh_existing(url):
            return
        if self._lazy:
            from lakemount.block.batch import put_lazily  # only the mount's small closes (a CLI verb's import budget)

            put_lazily(cat.adapter, url, body)
        else:
            cat.adapter.put(url, body)


def store_many(catalog: DataStore, repo: Repository, bodies: Sequence[tuple[bytes, str, str]]) -> list[DataInfo]:
    """Store small in-memory bodies whose digests are known, ``(data, sha256 hex, md5 hex)`` each, as one
    batch (:func:`~lakemount.block.batch.put_many`: one durable step on the local store); each is
    written whether its content address holds it already or not, which also refreshes the time a
    garbage collection judges it by.  Returns their ``DataInfo`` in order."""
    from lakemount.block.batch import put_many  # only the write-back pipeline batches (a CLI verb's import budget)

    infos: list[DataInfo] = []
    items: list[tuple[str, bytes]] = []
    for data, sha, md5 in bodies:
        address = data_address(sha)
        infos.append(DataInfo(address, len(data), md5, sha))
        items.append((catalog.physical_url(repo, address), data))
    put_many(catalog.adapter, items)
    return infos


def _hash_file(path: str) -> tuple[int, str, str]:
    """``(size, sha256 hex, md5 hex)`` of a local file; ``ObjectNotFound`` if it is missing."""
    sha, md5 = hashlib.sha256(), hashlib.md5(usedforsecurity=False)
    size = 0
    try:
        f = open(path, "rb")  # noqa: SIM115 - closed by the with below
    except (FileNotFoundError, IsADirectoryError):
        raise ObjectNotFound(f"local file {path}") from None
    with f:
        while chunk := f.read(CHUNK):
            sha.update(chunk)
            md5.update(chunk)
            size += len(chunk)
    return size, sha.hexdigest(), md5.hexdigest()
