"""Graveler's records: typed ids, entries, ranges, commits, branches, tags.

An :class:`Entry` is the metadata of one path.  Its encoding is compact and
deterministic (a version byte and a msgpack array in a fixed field order), so
the same entry always yields the same bytes, and its *identity* is a hash of
everything a user can observe (content address, size, ETag, mtime, type,
metadata, mode, owner, symlink target, hard-link group).  Two records are equal
iff key and identity are equal, which is what diff, merge and range reuse compare.
"""

from __future__ import annotations

import json
import stat
from collections.abc import Iterable
from dataclasses import field
from typing import Any, Final, NamedTuple, NewType

import msgpack

from lakemount.errors import Corrupt
from lakemount.records import record

Key = NewType("Key", bytes)
CommitID = NewType("CommitID", str)
RangeID = NewType("RangeID", str)
MetaRangeID = NewType("MetaRangeID", str)
StagingToken = NewType("StagingToken", str)

ENTRY_VERSION: Final = 1
_VERSION_BYTE: Final = bytes((ENTRY_VERSION,))
_pack = msgpack.packb
IDENTITY_LEN: Final = 16
FILE_MODE: Final = stat.S_IFREG | 0o644
DIR_MODE: Final = stat.S_IFDIR | 0o755
LINK_MODE: Final = stat.S_IFLNK | 0o777


class Entry(NamedTuple):
    """Metadata of one path.

    ``address`` is relative to the repository's storage namespace
    (``data/ab/<sha256>``) or an absolute URL for imported objects.
    ``metadata`` holds user metadata as sorted (name, value) pairs: S3
    ``x-amz-meta-*`` and FUSE ``user.*`` xattrs are the same thing.

    A NamedTuple rather than a frozen dataclass: listings decode hundreds of
    thousands of entries, and building a tuple costs a fraction of a frozen
    dataclass's ``__init__``.
    """

    address: str
    size: int
    etag: str = ""
    mtime_ns: int = 0
    content_type: str = ""
    metadata: tuple[tuple[str, str], ...] = ()
    mode: int = FILE_MODE
    uid: int = 0
    gid: int = 0
    target: str = ""
    link: str = ""  # hard links: "" for a single name, else its group (see lakemount/catalog/links.py)

    @property
    def is_dir(self) -> bool:
        return stat.S_ISDIR(self.mode)

    @property
    def is_symlink(self) -> bool:
        return stat.S_ISLNK(self.mode)

    def encode(self) -> bytes:
        # An entry of one name encodes its first ten fields only, as before hard links: its bytes and
        # identity are unchanged, and older readers read it.
        return _VERSION_BYTE + _pack(tuple(self) if self.link else self[:10])

    def identity(self) -> bytes:
        """Hash of everything a user can observe, mtime included (16 bytes).

        The mtime counts because the mount versions ``utimens`` like chmod and
        chown.  An upload of what a path already holds keeps the held entry
        (``Catalog.stage_upload``), so re-putting identical bytes is no change,
        as lakeFS's identity (which leaves time out) has it.
        """
        import hashlib  # here, not at import: OpenSSL's start is ~11 M instructions a read-only verb never needs

        return hashlib.blake2b(self.encode(), digest_size=IDENTITY_LEN).digest()

    def value(self) -> bytes:
        """The stored form of a record's value: identity followed by the encoding."""
        import hashlib

        enc = self.encode()
        return hashlib.blake2b(enc, digest_size=IDENTITY_LEN).digest() + enc



def decode_entry(data: bytes) -> Entry:
    """Decode :meth:`Entry.encode` output; raises ``Corrupt`` on anything else."""
    try:
        if data[0] != ENTRY_VERSION:
            raise ValueError(f"unknown entry version {data[0]}")
        f = msgpack.unpackb(data[1:], use_list=False, raw=False)
        if len(f) == 10:
            return _make_entry(f + _NO_LINK)
        if len(f) != 11:
            raise ValueError(f"entry has {len(f)} fields")
        return _make_entry(f)
    except (ValueError, IndexError, TypeError, msgpack.ExtraData, msgpack.FormatError, msgpack.StackError) as exc:
        raise Corrupt(f"undecodable entry: {exc}") from exc


_make_entry = Entry._make
_NO_LINK: Final = ("",)


def _unpack(data: bytes) -> Any:
    return msgpack.unpackb(data, use_list=False, raw=False)


def decode_value(value: bytes) -> Entry:
    """Decode a stored record value (identity + entry); raises ``Corrupt``."""
    try:
        if value[IDENTITY_LEN] == ENTRY_VERSION:
            f = _unpack(value[IDENTITY_LEN + 1 :])
            if len(f) == 10:
                return _make_entry(f + _NO_LINK)
            if len(f) == 11:
                return _make_entry(f)
    except Exception:  # noqa: BLE001 - any decoding failure is reported below
        pass
    return decode_entry(value[IDENTITY_LEN:])


def prefix_end(prefix: bytes) -> bytes | None:
    """The smallest key greater than every key starting with ``prefix`` (None: no bound)."""
    p = bytearray(prefix)
    while p:
        if p[-1] < 0xFF:
            p[-1] += 1
            return bytes(p)
        p.pop()
    return None


MOVE_MARK: Final = "mv."
"""How a staging token that is a move record (a directory rename, ``graveler/moves.py``) begins; a real token is hex."""


def real_tokens(tokens: Iterable[StagingToken]) -> list[StagingToken]:
    """``tokens`` without move records (what a staging backend may be asked about)."""
    return [t for t in tokens if not t.startswith(MOVE_MARK)]


def has_moves(tokens: Iterable[StagingToken]) -> bool:
    """Whether ``tokens`` hold a move record."""
    return any(t.startswith(MOVE_MARK) for t in tokens)


def value_identity(value: bytes) -> bytes:
    """The part of a staged/committed value that identifies its content (the first ``IDENTITY_LEN`` bytes)."""
    return value[:IDENTITY_LEN]


@record(frozen=True, slots=True)
class RangeInfo:
    """A range as its metarange describes it."""

    id: RangeID
    min_key: bytes
    max_key: bytes
    count: int
    size: int  # file size in bytes
    checksum: str  # xxh3-128 hex of the file

    def encode(self) -> bytes:
        return msgpack.packb((self.id, self.min_key, self.count, self.size, self.checksum), use_bin_type=True)

    @staticmethod
    def decode(max_key: bytes, data: bytes) -> RangeInfo:
        try:
            f = msgpack.unpackb(data, raw=False)
            return RangeInfo(RangeID(f[0]), f[1], max_key, f[2], f[3], f[4])
        except (ValueError, IndexError, TypeError, msgpack.ExtraData, msgpack.FormatError) as exc:
            raise Corrupt(f"undecodable range record: {exc}") from exc


@record(frozen=True, slots=True)
class Commit:
    """An immutable commit; its id is a hash of everything but the id and generation."""

    id: CommitID
    parents: tuple[CommitID, ...]
    metarange_id: MetaRangeID
    metarange_checksum: str
    message: str
    committer: str
    creation_date: float
    metadata: tuple[tuple[str, str], ...] = ()
    generation: int = 1

    @staticmethod
    def compute_id(
        parents: tuple[str, ...],
        metarange_id: str,
        message: str,
        committer: str,
        creation_date: float,
        metadata: tuple[tuple[str, str], ...],
    ) -> CommitID:
        canon = json.dumps(
            [list(parents), metarange_id, message, committer, repr(creation_date), [list(p) for p in metadata]],
            separators=(",", ":"),
            ensure_ascii=False,
        )
        import hashlib

        return CommitID(hashlib.sha256(canon.encode()).hexdigest())

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "parents": list(self.parents),
            "metarange_id": self.metarange_id,
            "metarange_checksum": self.metarange_checksum,
            "message": self.message,
            "committer": self.committer,
            "creation_date": self.creation_date,
            "metadata": dict(self.metadata),
            "generation": self.generation,
        }

    @staticmethod
    def from_json(d: dict[str, Any]) -> Commit:
        return Commit(
            CommitID(d["id"]),
            tuple(CommitID(p) for p in d["parents"]),
            MetaRangeID(d["metarange_id"]),
            d["metarange_checksum"],
            d["message"],
            d["committer"],
            float(d["creation_date"]),
            tuple(sorted((str(k), str(v)) for k, v in d.get("metadata", {}).items())),
            int(d["generation"]),
        )


@record(frozen=True, slots=True)
class Repository:
    """A repository's settings: where its data lives and which branch is the default."""

    name: str
    storage_namespace: str
    default_branch: str
    creation_date: float


@record(frozen=True, slots=True)
class Branch:
    """A branch: its head commit, the staging token writes go to, and sealed tokens.

    Sealed tokens belong to commits in flight (newest first); their entries are
    still visible on the branch until a commit that contains them lands.
    """

    name: str
    commit_id: CommitID
    staging_token: StagingToken
    sealed_tokens: tuple[StagingToken, ...] = field(default=())
    # Left out of listings unless asked (lakeFS 1.44's hidden branches: a transaction's temporary branch).
    # Not part of equality: compare-and-swap compares a branch's head and staging, never this.
    hidden: bool = field(default=False, compare=False)

    @property
    def tokens(self) -> tuple[StagingToken, ...]:
        """Every token whose entries are visible, newest first."""
        return (self.staging_token, *self.sealed_tokens)


@record(frozen=True, slots=True)
class Tag:
    """A tag: an immutable name for a commit."""

    name: str
    commit_id: CommitID


EMPTY_METARANGE: Final = MetaRangeID("0" * 64)
