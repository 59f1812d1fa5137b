"""A small bloom filter over keys: each staging file carries one, so a point lookup opens few files.

Double hashing over xxh3-128 (two 64-bit halves), about 10 bits and 7 probes
per key: roughly a 1% false-positive rate.  The serialized form is one byte of
probe count followed by the bit array.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

import xxhash

from lakemount.errors import Corrupt

BITS_PER_KEY: Final = 10
PROBES: Final = 7
_MASK64: Final = (1 << 64) - 1


class Bloom:
    """An immutable-once-built bloom filter (build with :meth:`of`, read with :meth:`decode`)."""

    __slots__ = ("_bits", "_m", "_k")

    def __init__(self, bits: bytes | bytearray, probes: int) -> None:
        self._bits = bits
        self._m = len(bits) * 8
        self._k = probes

    @staticmethod
    def of(keys: Iterable[bytes], count: int) -> Bloom:
        """A filter holding ``keys`` (``count`` of them: sizes the bit array)."""
        bits = bytearray(max(8, (count * BITS_PER_KEY + 7) // 8))
        m = len(bits) * 8
        for key in keys:
            h = xxhash.xxh3_128_intdigest(key)
            h1, h2 = h & _MASK64, h >> 64
            for i in range(PROBES):
                p = (h1 + i * h2) % m
                bits[p >> 3] |= 1 << (p & 7)
        return Bloom(bytes(bits), PROBES)

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
