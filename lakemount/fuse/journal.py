"""The write-back journal: a mount's acknowledged but not yet staged changes, on the node's disk.

One directory per mountpoint holds ``log`` (framed, checksummed records, appended
in order) and ``spool/`` (the temp files written files grow in; a journaled
file's record names its temp file, which is its data file from then on, so no
second copy is made).  A record is ``MAGIC``, the payload's length and its
CRC-32, then the payload (JSON).  ``put`` records carry a file's entry, its
data file and the data's SHA-256 (a small file's record carries its bytes too,
``inline``: only the log needs a sync for it, and the replay writes its data file
again from them if the crash lost it); ``apply`` records carry staged changes as
they were made; ``done`` records say every record up to a sequence number is
staged.  A ``put`` record of a large file written through passthrough may carry no digests (stop 55: the
close journals it unhashed, the pipeline hashes it); it names the boot it was written in instead, and whether its
data file was synced before it.  :meth:`Journal.replay` returns what is not done: a torn tail (a record
whose write never finished, so it was never acknowledged) is cut off; a record
whose checksum fails, or whose data file does not hold the bytes it names, is
returned apart as corrupt, to be kept aside, never staged.  With ``fsync``
each append waits for the data and the record to reach the disk (power-loss
safe); without it an append reaches the kernel (safe against a crash of the
mount) and :meth:`sync` makes the journal's files durable (run on a short interval).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import os
import threading
import zlib
from dataclasses import dataclass, field
from typing import Any

from lakemount.node import HEADER, MAGIC, MAX_RECORD  # the frame, which every process of the node reads

# One encoder for every record: ``json.dumps`` with any argument builds a new ``JSONEncoder`` per call, which was
# a quarter of a small file's append on the request loop (stop 56).  The bytes are what ``dumps`` wrote.
_ENCODE = json.JSONEncoder(separators=(",", ":")).encode


def _payload(body: dict[str, Any], seq: int) -> bytes:
    """A record's JSON: ``body`` and its ``seq``.  A small file's bytes (``inline``) may come as ``bytes``: they are
    written as base64 (as a ``str`` of it would be), spliced in after the rest, not passed through the encoder, whose
    escaping check of the 1,368 characters of a 1 KiB file was 7 us of a close on the request loop (stop 57); base64's
    characters need no escaping in JSON, so the bytes are those ``json.dumps`` writes, ``inline`` last."""
    inline = body.get("inline")
    if type(inline) is not bytes:
        return _ENCODE({**body, "seq": seq}).encode()
    rest = body.copy()
    del rest["inline"]
    rest["seq"] = seq
    return b"".join((_ENCODE(rest).encode()[:-1], b',"inline":"', binascii.b2a_base64(inline, newline=False), b'"}'))


@dataclass(slots=True)
class Record:
    """One journal record: its sequence number and its payload (``op`` is ``put``, ``apply`` or ``done``)."""

    seq: int
    body: dict[str, Any]
    corrupt: str = ""  # why the record may not be staged ("" when it may)
    raw: bytes = field(default=b"", repr=False)


class Journal:
    """The log and spool of one mountpoint's write-back; thread-safe."""

    def __init__(self, directory: str, *, fsync: bool) -> None:
        self.dir = directory
        self.spool = os.path.join(directory, "spool")
        os.makedirs(self.spool, exist_ok=True)
        self.log_path = os.path.join(directory, "log")
        self.fsync = fsync
        self._lock = threading.Lock()
        self._fd = os.open(self.log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        self.seq = 0
        self.appended = 0  # bytes of the log
        self._unsynced: list[str] = []  # data files appended since the last sync (without ``fsync``)

    def close(self) -> None:
        with self._lock:
            if self._fd >= 0:
                os.close(self._fd)
                self._fd = -1

    def append(self, body: dict[str, Any], *, data_fd: int = -1, data_path: str = "") -> int:
        """Write one record (``seq`` assigned here) and return its sequence number.  A ``put`` record's ``inline``
        may be the file's bytes (written as base64, as replay reads it) or that base64 as a ``str``.

        With ``fsync``, ``data_fd`` (the record's data file) and the log are
        synced before this returns; without, ``data_path`` is synced by the
        next :meth:`sync`.  Raises ``OSError`` (ENOSPC on a full disk).
        """
        if self.fsync and data_fd >= 0:
            os.fdatasync(data_fd)
        with self._lock:
            if data_path and not self.fsync:
                self._unsynced.append(data_path)
            self.seq += 1
            seq = self.seq
            payload = _payload(body, seq)
            frame = HEADER.pack(MAGIC, len(payload), zlib.crc32(payload)) + payload
            written = os.write(self._fd, frame)
            if written != len(frame):  # a short write to a full disk: cut it off, refuse the record
                os.ftruncate(self._fd, self.appended)
                raise OSError(28, "journal disk full")
            self.appended += len(frame)
            if self.fsync:
                os.fdatasync(self._fd)
            return seq

    def sync(self) -> None:
        """Make every record and data file appended so far durable.

        Only the journal's own files are synced (a ``syncfs`` would write back
        every other process's dirty pages on that disk too).  A data file gone
        meanwhile was staged: it is in the lake.
        """
        with self._lock:
            paths, self._unsynced = self._unsynced, []
            fd = os.dup(self._fd) if self._fd >= 0 else -1
        for path in paths:
            try:
                data_fd = os.open(path, os.O_RDONLY)
            except OSError:
                continue
            try:
                os.fdatasync(data_fd)
            except OSError:
                pass
            finally:
                os.close(data_fd)
        if fd >= 0:
            try:
                os.fdatasync(fd)
            except OSError:
                pass
            finally:
                os.close(fd)

    def restart_if(self, done: int) -> bool:
        """Empty the log if its last record is ``done`` (everything staged); True if it was emptied."""
        with self._lock:
            if self.seq != done or self.appended == 0:
                return False
            os.ftruncate(self._fd, 0)
            self.appended = 0
            return True

    def replay(self) -> list[Record]:
        """The records not yet staged, in order (corrupt ones marked), after a crash or a restart.

        Reads the whole log; the torn tail of a record never acknowledged is cut off.
        """
        with open(self.log_path, "rb") as f:
            data = f.read()
        records: list[Record] = []
        done = 0
        pos = 0
        good_end = 0
        while pos + HEADER.size <= len(data):
            magic, length, crc = HEADER.unpack_from(data, pos)
            start, end = pos + HEADER.size, pos + HEADER.size + length
            if magic != MAGIC or length > MAX_RECORD:
                # Not a record boundary: the bytes up to the next magic are one corrupt record.
                nxt = data.find(MAGIC, pos + 1)
                stop = nxt if nxt >= 0 else len(data)
                records.append(Record(0, {}, "the journal's framing is damaged here", data[pos:stop]))
                pos = good_end = stop
                continue
            if end > len(data):
                break  # torn tail
            payload = data[start:end]
            if zlib.crc32(payload) != crc:
                records.append(Record(0, {}, "checksum mismatch", data[pos:end]))
                pos = good_end = end
                continue
            try:
                body = json.loads(payload)
            except ValueError:
                records.append(Record(0, {}, "not a JSON record", data[pos:end]))
                pos = good_end = end
                continue
            seq = int(body.get("seq", 0))
            if body.get("op") == "done":
                done = max(done, int(body.get("upto", 0)))
            else:
                records.append(Record(seq, body, "", data[pos:end]))
            self.seq = max(self.seq, seq)
            pos = good_end = end
        if good_end < len(data):
            os.truncate(self.log_path, good_end)
        self.appended = good_end
        out = [r for r in records if r.corrupt or r.seq > done]
        for r in out:
            if not r.corrupt and r.body.get("op") == "put":
                r.corrupt = _check_data(r.body)
        return out


def boot_id() -> str:
    """The kernel's id of this boot ("" if unknown): a replay in the same boot saw no power loss since the record."""
    try:
        with open("/proc/sys/kernel/random/boot_id") as f:
            return f.read().strip()
    except OSError:
        return ""


def _check_unhashed(body: dict[str, Any], path: str) -> str:
    """Why a ``put`` record journaled unhashed (no digests) may not be staged ("" when it may).

    Its bytes can be trusted when they cannot have been torn: the record says its data file was synced before
    it was appended, or the replay runs in the boot that wrote it (a ``kill -9`` of the mount leaves the file
    whole in the page cache; only a power loss or a crash of the host can tear it).  Otherwise, or when the
    file's size is not the record's, it is kept aside (never staged as wrong bytes)."""
    try:
        size = os.stat(path).st_size
    except OSError:
        return f"its data file {path} cannot be read"
    if size != body.get("size"):
        return f"its data file {path} holds {size} bytes, not the {body.get('size')} the record names"
    if not body.get("synced") and (not body.get("boot") or body.get("boot") != boot_id()):
        return (f"its data file {path} was journaled unhashed and unsynced before the host restarted "
                "(a power loss may have torn it; no digest can tell)")
    return ""


def _check_data(body: dict[str, Any]) -> str:
    """Why a ``put`` record's data file does not hold its bytes ("" when it does).

    A record carrying its bytes (``inline``) writes its data file again from them when the file did
    not reach the disk (only the log is synced for such a record); the bytes must match the record's
    size and SHA-256.  A small file held in memory has no data file: its record's bytes are all there is."""
    path = str(body.get("data", ""))
    if "inline" in body:
        try:
            data = base64.b64decode(str(body["inline"]), validate=True)
        except ValueError:
            return "its inline bytes are not base64"
        digest = hashlib.sha256(data).hexdigest()
        if len(data) != body.get("size") or digest != body.get("sha256"):
            return f"its inline bytes are not the bytes the record names (size {len(data)}, sha256 {digest[:16]}...)"
        if path and _file_digest(path) != (len(data), digest):
            try:  # a new file in its place: the old name may also be a stored object's (never changed)
                with open(path + ".replayed", "wb") as f:
                    f.write(data)
                os.replace(path + ".replayed", path)
            except OSError as exc:
                return f"its data file {path} cannot be written again: {exc.strerror}"
        return ""
    if not body.get("sha256"):
        return _check_unhashed(body, path)
    found = _file_digest(path)
    if found is None:
        return f"its data file {path} cannot be read"
    size, digest = found
    if size != body.get("size") or digest != body.get("sha256"):
        return f"its data file {path} does not hold the bytes the record names (size {size}, sha256 {digest[:16]}...)"
    return ""


def _file_digest(path: str) -> tuple[int, str] | None:
    """(size, SHA-256 hex) of the file at ``path``; None if it cannot be read."""
    sha = hashlib.sha256()
    size = 0
    try:
        with open(path, "rb") as f:
            while chunk := f.read(1 << 20):
                sha.update(chunk)
                size += len(chunk)
    except OSError:
        return None
    return size, sha.hexdigest()

