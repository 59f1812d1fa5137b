"""A small bloom filter over keys: each staging file carries one, so a point lookup opens few files.

Double hashing over xxh3-128 (two 64-bit halves), about 10 bits and 7 probes
per key: roughly a 1% false-positive rate.  The serialized form is one byte of
probe count followed by the bit array.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

import numpy as np
import xxhash

from lakemount.errors import Corrupt

try:
    from lakemount.graveler._sstblock import bloom_bits as _bloom_bits_c
except ImportError:  # built without a compiler, or from older sources
    _bloom_bits_c = None

BITS_PER_KEY: Final = 10
PROBES: Final = 7
_MASK64: Final = (1 << 64) - 1
SMALL: Final = 16  # keys up to which a filter is built in plain Python (fewer calls than numpy's)


class Bloom:
    """An immutable-once-built bloom filter (build with :meth:`of`, read with :meth:`decode`)."""

    __slots__ = ("_bits", "_m", "_k")

    def __init__(self, bits: bytes | bytearray, probes: int) -> None:
        self._bits = bits
        self._m = len(bits) * 8
        self._k = probes

    @staticmethod
    def of(keys: Iterable[bytes], count: int) -> Bloom:
        """A filter holding ``keys`` (``count`` of them: sizes the bit array).

        The probes of all keys at once, in C (``_sstblock.bloom_bits``) when it is built, else with
        numpy (or, for a few keys, a Python loop): a flush or a compaction builds one filter over
        every key it writes, and a loop of 7 probes per key in Python was the biggest cost of
        writing a staging file.  Same bits as :meth:`may_contain` probes: (h1 + i*h2) mod m,
        computed as (h1 mod m + i*(h2 mod m)) mod m, which stays below 2**64.
        """
        size = max(8, (count * BITS_PER_KEY + 7) // 8)
        m = size * 8
        if _bloom_bits_c is not None:  # no call per key or probe: a flush's 64 keys ~7 us, numpy ~38
            return Bloom(_bloom_bits_c(b"".join(map(xxhash.xxh3_128_digest, keys)), size, PROBES), PROBES)
        if count <= SMALL:
            # A lone writer's flush (one key): numpy's dozen calls cost more than the probes (33 against
            # 17 us for one key, 57 against 22 for five, measured), and it is every flush of a lone writer.
            bits = bytearray(size)
            for k in keys:
                h = xxhash.xxh3_128_intdigest(k)
                first, step = (h & _MASK64) % m, (h >> 64) % m
                for i in range(PROBES):
                    p = (first + i * step) % m
                    bits[p >> 3] |= 1 << (p & 7)
            return Bloom(bytes(bits), PROBES)
        digests = b"".join(map(xxhash.xxh3_128_digest, keys))
        if not digests:
            return Bloom(bytes(size), PROBES)
        halves = np.frombuffer(digests, dtype=">u8").reshape(-1, 2).astype(np.uint64)  # [high, low] of each
        h1 = halves[:, 1] % np.uint64(m)
        h2 = halves[:, 0] % np.uint64(m)
        probes = (h1[:, None] + np.arange(PROBES, dtype=np.uint64)[None, :] * h2[:, None]) % np.uint64(m)
        flags = np.zeros(m, dtype=np.bool_)
        flags[probes.ravel()] = True
        return Bloom(np.packbits(flags, bitorder="little").tobytes(), PROBES)

    def may_contain(self, key: bytes) -> bool:
        """False only if ``key`` was certainly not added."""
        h = xxhash.xxh3_128_intdigest(key)
        h1, h2 = h & _MASK64, h >> 64
        m, bits = self._m, self._bits
        for i in range(self._k):
            p = (h1 + i * h2) % m
            if not bits[p >> 3] & (1 << (p & 7)):
                return False
        return True

    def encode(self) -> bytes:
        return bytes((self._k,)) + bytes(self._bits)

    @staticmethod
    def decode(data: bytes, name: str) -> Bloom:
        """The filter :meth:`encode` wrote; ``Corrupt`` naming ``name`` for anything else."""
        if len(data) < 2 or not 1 <= data[0] <= 32:
            raise Corrupt(f"{name}: bad bloom filter")
        return Bloom(data[1:], data[0])
