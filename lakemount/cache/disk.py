"""``DiskCache``: a bounded on-disk cache of immutable byte strings, shared by processes.

The second tier, which survives restarts and is shared by every lakemount
process on a node (mounts, gateway, CLI) pointing at the same directory.

Layout: one file per key at ``<dir>/<h[0:2]>/<h[2:4]>/<h>`` where ``h`` is the
xxh3-128 of the key, so any key is a safe file name and no directory grows
huge.  Each file is ``header | key | payload``; the header carries the payload's
length and xxh3-64.  A read that finds a short file, a different key or a bad
checksum treats it as a miss, deletes the file and counts it as ``corrupt``:
bad bytes are never returned.  That check is also why writes skip fsync: a file
torn by a crash is detected and dropped, and the content can always be fetched
again from the block store.

Writes are atomic (temp file + ``os.replace``), so concurrent writers of one
key, in any process, leave one whole file.  Recency is the file's mtime,
refreshed on every hit, which every process sees.  The size bound is kept by
scanning: each process tracks the total it last scanned plus what it wrote
since, and when that passes ``max_bytes`` (or the scan is older than
``rescan_interval``) it rescans and deletes least-recently-used files down to
``low_water`` of the bound.  A file vanishing under us (another process
evicted it) is a miss, never an error.
"""

from __future__ import annotations

import contextlib
import errno
import os
import struct
import threading
import time
from collections.abc import Callable

import xxhash

from lakemount.cache.singleflight import SingleFlight
from lakemount.errors import InvalidArgument, Unavailable
from lakemount.logs import get_logger
from lakemount.records import record

log = get_logger(__name__)

_MAGIC = b"LMC1"
# magic, payload length, xxh3_64 of payload, key length (then key, then payload)
_HEADER = struct.Struct("<4sQQH")
TEMP_PREFIX = ".tmp-"
_STALE_TEMP_NS = 3600 * 10**9  # a temp file this old belongs to a dead writer


@record(frozen=True, slots=True)
class _Entry:
    """One cached file as the index keeps it: its path, size and modification time."""

    path: str
    size: int
    mtime_ns: int


class DiskCache:
    """A cache of byte strings in ``directory``, holding about ``max_bytes`` of files.

    Thread-safe and multi-process-safe.  I/O errors never escape ``get`` and
    ``put`` (a cache that cannot read or write only misses); they are counted
    in ``stats()["errors"]`` and logged.  The constructor raises
    ``Unavailable`` if ``directory`` cannot be created.
    """

    def __init__(
        self,
        directory: str | os.PathLike[str],
        max_bytes: int,
        *,
        low_water: float = 0.9,
        rescan_interval: float = 60.0,
    ) -> None:
        if max_bytes < 0:
            raise InvalidArgument(f"max_bytes must be >= 0, got {max_bytes}")
        if not 0.0 < low_water <= 1.0:
            raise InvalidArgument(f"low_water must be within (0, 1], got {low_water}")
        self.directory = os.fspath(directory)
        self.max_bytes = max_bytes
        self.low_water = low_water
        self.rescan_interval = rescan_interval
        try:
            os.makedirs(self.directory, exist_ok=True)
        except OSError as e:
            raise Unavailable(f"cannot create cache directory {self.directory}: {e.strerror or e}") from e
        self._lock = threading.Lock()
        self._evict_lock = threading.Lock()
        # Bytes found by the last scan plus bytes this process wrote since;
        # None until the first write triggers the first scan.
        self._approx_bytes: int | None = None
        self._last_scan = 0.0
        self._last_ns = 0
        self._flight: SingleFlight[bytes] = SingleFlight()
        self._counts = dict.fromkeys(("hits", "misses", "corrupt", "evictions", "writes", "errors", "scans"), 0)

    # --- paths and clock ---------------------------------------------------------

    def path_of(self, key: str) -> str:
        """Return the file that holds ``key`` (whether or not it exists)."""
        h = xxhash.xxh3_128_hexdigest(key.encode())
        return os.path.join(self.directory, h[0:2], h[2:4], h)

    def _now_ns(self) -> int:
        # Strictly increasing within the process, so that two accesses in the
        # same clock tick still have an LRU order.
        with self._lock:
            self._last_ns = max(time.time_ns(), self._last_ns + 1)
            return self._last_ns

    def _count(self, name: str, n: int = 1) -> None:
        with self._lock:
            self._counts[name] += n

    def _io_error(self, what: str, e: OSError) -> None:
        with self._lock:
            self._counts["errors"] += 1
            n = self._counts["errors"]
        # Log the 1st, 2nd, 4th, 8th... error: visible, but a full disk cannot flood the log.
        if n & (n - 1) == 0:
            log.warning("disk cache %s: %s failed: %s (%d errors so far)", self.directory, what, e, n)

    # --- Cache -------------------------------------------------------------------

    def get(self, key: str) -> bytes | None:
        path = self.path_of(key)
        try:
            with open(path, "rb") as f:
                inode = os.fstat(f.fileno()).st_ino
                blob = f.read()
        except (FileNotFoundError, NotADirectoryError):
            self._count("misses")
            return None
        except OSError as e:
            self._io_error("read", e)
            self._count("misses")
            return None
        payload = _decode(key, blob)
        if payload is None:
            self._drop_corrupt(path, inode)
            self._count("misses")
            return None
        now = self._now_ns()
        with contextlib.suppress(OSError):  # evicted meanwhile: the hit still stands
            os.utime(path, ns=(now, now))
        self._count("hits")
        return payload

    def _drop_corrupt(self, path: str, inode: int) -> None:
        self._count("corrupt")
        log.warning("disk cache: dropping corrupt file %s", path)
        # Only delete the file we read: another process may have just replaced it with a good one.
        with contextlib.suppress(OSError):
            st = os.stat(path)
            if st.st_ino == inode:
                os.unlink(path)
                with self._lock:
                    if self._approx_bytes is not None:
                        self._approx_bytes -= st.st_size

    def put(self, key: str, data: bytes) -> None:
        encoded_key = key.encode()
        if len(encoded_key) > 0xFFFF:
            raise InvalidArgument(f"cache key longer than 65535 bytes: {key[:40]}...")
        size = _HEADER.size + len(encoded_key) + len(data)
        if size > self.max_bytes:
            return
        path = self.path_of(key)
        now = self._now_ns()
        try:
            # Content is immutable: an existing file only needs its recency refreshed.
            os.utime(path, ns=(now, now))
            return
        except FileNotFoundError:
            pass
        except OSError as e:
            self._io_error("touch", e)
        try:
            self._write(path, encoded_key, data, now)
        except OSError as e:
            self._io_error("write", e)
            return
        self._count("writes")
        with self._lock:
            if self._approx_bytes is not None:
                self._approx_bytes += size
            due = (
                self._approx_bytes is None
                or self._approx_bytes > self.max_bytes
                or time.monotonic() - self._last_scan > self.rescan_interval
            )
        if due:
            self.evict()

    def _write(self, path: str, encoded_key: bytes, data: bytes, now_ns: int) -> None:
        directory, name = os.path.split(path)
        tmp = os.path.join(directory, f"{TEMP_PREFIX}{os.urandom(6).hex()}-{name}")
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC
        try:
            fd = os.open(tmp, flags, 0o644)
        except FileNotFoundError:
            os.makedirs(directory, exist_ok=True)
            fd = os.open(tmp, flags, 0o644)
        try:
            try:
                header = _HEADER.pack(_MAGIC, len(data), xxhash.xxh3_64_intdigest(data), len(encoded_key))
                for chunk in (header + encoded_key, data):
                    view = memoryview(chunk)
                    while view:
                        view = view[os.write(fd, view) :]
                os.utime(fd, ns=(now_ns, now_ns))
            finally:
                os.close(fd)
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise

    def get_or_load(self, key: str, load: Callable[[], bytes]) -> bytes:
        data = self.get(key)
        if data is not None:
            return data

        def load_and_store() -> bytes:
            loaded = load()
            self.put(key, loaded)
            return loaded

        return self._flight.do(key, load_and_store)

    # --- bound ------------------------------------------------------------------

    def evict(self) -> None:
        """Rescan the directory and delete least-recently-used files down to the low-water mark.

        Runs in the calling thread; if another thread of this process is
        already evicting, returns at once.  Other processes may evict at the
        same time; deleting an already deleted file is harmless.
        """
        if not self._evict_lock.acquire(blocking=False):
            return
        try:
            entries = self._scan()
            total = sum(e.size for e in entries)
            evicted = 0
            if total > self.max_bytes:
                target = int(self.max_bytes * self.low_water)
                for entry in sorted(entries, key=lambda e: e.mtime_ns):
                    if total <= target:
                        break
                    try:
                        os.unlink(entry.path)
                    except FileNotFoundError:
                        pass
                    except OSError as e:
                        self._io_error("evict", e)
                        continue
                    total -= entry.size
                    evicted += 1
            with self._lock:
                self._approx_bytes = total
                self._last_scan = time.monotonic()
                self._counts["scans"] += 1
                self._counts["evictions"] += evicted
        finally:
            self._evict_lock.release()

    def _scan(self) -> list[_Entry]:
        entries: list[_Entry] = []
        stale_before = time.time_ns() - _STALE_TEMP_NS
        for level1 in _subdirs(self.directory):
            for level2 in _subdirs(level1):
                try:
                    with os.scandir(level2) as it:
                        files = list(it)
                except OSError:
                    continue
                for f in files:
                    try:
                        st = f.stat(follow_symlinks=False)
                    except OSError:
                        continue  # evicted by another process while we looked
                    if f.name.startswith(TEMP_PREFIX):
                        if st.st_mtime_ns < stale_before:
                            with contextlib.suppress(OSError):
                                os.unlink(f.path)
                        continue
                    if f.is_file(follow_symlinks=False):
                        entries.append(_Entry(f.path, st.st_size, st.st_mtime_ns))
        return entries

    def total_bytes(self) -> int:
        """Bytes of cache files on disk now (a full scan; for tests and `doctor`)."""
        return sum(e.size for e in self._scan())

    def stats(self) -> dict[str, int]:
        """Counters since creation; ``bytes`` is this process's estimate of the directory's size."""
        with self._lock:
            out = dict(self._counts)
            out["bytes"] = self._approx_bytes or 0
            out["max_bytes"] = self.max_bytes
            return out


def _subdirs(path: str) -> list[str]:
    try:
        with os.scandir(path) as it:
            return sorted(e.path for e in it if len(e.name) == 2 and e.is_dir(follow_symlinks=False))
    except OSError as e:
        if e.errno != errno.ENOENT:
            log.warning("disk cache: cannot list %s: %s", path, e)
        return []


def _decode(key: str, blob: bytes) -> bytes | None:
    """Return the payload of a cache file, or None if the file is not a whole, intact file for ``key``."""
    if len(blob) < _HEADER.size:
        return None
    magic, length, checksum, key_len = _HEADER.unpack_from(blob)
    start = _HEADER.size + key_len
    if magic != _MAGIC or len(blob) != start + length:
        return None
    if blob[_HEADER.size : start] != key.encode():
        return None
    payload = blob[start:]
    if xxhash.xxh3_64_intdigest(payload) != checksum:
        return None
    return payload
