"""``RouterAdapter``: one ``BlockAdapter`` that dispatches each URL by its scheme.

Graveler sees a single block adapter; storage namespaces of different
repositories may live on different backends (``local://`` for a laptop repo,
``s3://`` for a shared one).  Backends can be registered as factories so that an
expensive one (boto3 costs ~0.3 s to import) is built on first use only.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, BinaryIO

from lakemount.block.urls import join_url, scheme_of
from lakemount.errors import InvalidArgument
from lakemount.graveler.ports import BlockAdapter, ObjectInfo

__all__ = ["RouterAdapter", "join_url", "presign"]

AdapterFactory = Callable[[], BlockAdapter]


class RouterAdapter:
    """Dispatches by URL scheme to ``adapters`` (built) or ``factories`` (built on first use).

    A URL whose scheme has no backend raises ``InvalidArgument``.
    """

    def __init__(
        self,
        adapters: Mapping[str, BlockAdapter] | None = None,
        factories: Mapping[str, AdapterFactory] | None = None,
    ) -> None:
        self._lock = threading.Lock()
        self._adapters: dict[str, BlockAdapter] = {}
        self._factories: dict[str, AdapterFactory] = {}
        for scheme, adapter in (adapters or {}).items():
            self.register(scheme, adapter)
        for scheme, factory in (factories or {}).items():
            self.register_factory(scheme, factory)

    def register(self, scheme: str, adapter: BlockAdapter) -> None:
        """Serve ``scheme://`` URLs with ``adapter`` (replacing any previous backend)."""
        scheme = scheme.lower()
        with self._lock:
            self._factories.pop(scheme, None)
            self._adapters[scheme] = adapter

    def register_factory(self, scheme: str, factory: AdapterFactory) -> None:
        """Serve ``scheme://`` URLs with ``factory()``, called once, on first use."""
        scheme = scheme.lower()
        with self._lock:
            self._adapters.pop(scheme, None)
            self._factories[scheme] = factory

    @property
    def schemes(self) -> frozenset[str]:
        with self._lock:
            return frozenset(self._adapters) | frozenset(self._factories)

    def is_built(self, scheme: str) -> bool:
        """Whether the backend for ``scheme`` exists yet (false while only its factory is known)."""
        with self._lock:
            return scheme.lower() in self._adapters

    def adapter_for(self, url: str) -> BlockAdapter:
        """Return the backend serving ``url``; raise ``InvalidArgument`` for an unknown scheme."""
        scheme = scheme_of(url)
        adapter = self._adapters.get(scheme)
        if adapter is not None:
            return adapter
        # Built under the lock so concurrent first uses share one client.
        with self._lock:
            adapter = self._adapters.get(scheme)
            if adapter is None:
                factory = self._factories.get(scheme)
                if factory is None:
                    known = ", ".join(sorted(set(self._adapters) | set(self._factories))) or "none"
                    raise InvalidArgument(f"no block store for scheme {scheme!r} in {url!r} (known: {known})")
                adapter = factory()
                self._adapters[scheme] = adapter
                del self._factories[scheme]
            return adapter

    # --- BlockAdapter --------------------------------------------------------

    def put(self, url: str, data: bytes) -> None:
        self.adapter_for(url).put(url, data)

    def put_lazily(self, url: str, data: bytes) -> None:
        from lakemount.block.batch import put_lazily  # only the mount's small closes (a CLI verb's import budget)

        put_lazily(self.adapter_for(url), url, data)

    def put_many(self, items: Sequence[tuple[str, bytes]]) -> None:
        """Each backend's share of the batch in one step (in order within a backend)."""
        from lakemount.block.batch import put_many  # only the write-back pipeline batches (a CLI verb's import budget)

        by_scheme: dict[str, list[tuple[str, bytes]]] = {}
        for url, data in items:
            by_scheme.setdefault(scheme_of(url), []).append((url, data))
        for group in by_scheme.values():
            put_many(self.adapter_for(group[0][0]), group)

    def put_file(self, url: str, path: str, *, link: bool = False) -> None:
        self.adapter_for(url).put_file(url, path, link=link)

    def parts_for(self, url: str) -> Any:
        """The backend's uploads in parts for ``url`` (catalog/streaming.py's ``PartUploads``), None if it has none."""
        backend = self.adapter_for(url)
        parts_for = getattr(backend, "parts_for", None)
        return parts_for(url) if parts_for is not None else None

    def get(self, url: str) -> bytes:
        return self.adapter_for(url).get(url)

    def get_range(self, url: str, start: int, length: int) -> bytes:
        return self.adapter_for(url).get_range(url, start, length)

    def open(self, url: str) -> BinaryIO:
        return self.adapter_for(url).open(url)

    def stat(self, url: str) -> ObjectInfo:
        return self.adapter_for(url).stat(url)

    def exists(self, url: str) -> bool:
        return self.adapter_for(url).exists(url)

    def touch(self, url: str) -> None:
        self.adapter_for(url).touch(url)

    def copy(self, src_url: str, dst_url: str) -> None:
        if scheme_of(src_url) != scheme_of(dst_url):
            raise InvalidArgument(f"cannot copy between block stores: {src_url!r} to {dst_url!r}")
        self.adapter_for(src_url).copy(src_url, dst_url)

    def delete(self, url: str) -> None:
        self.adapter_for(url).delete(url)

    def list(self, prefix_url: str) -> Iterator[ObjectInfo]:
        return self.adapter_for(prefix_url).list(prefix_url)

    def presign(self, url: str, method: str) -> tuple[str, float] | None:
        """The backend's presigned URL for ``url`` (see ``S3Adapter.presign``); None if it does not presign."""
        return presign(self.adapter_for(url), url, method)


def presign(adapter: object, url: str, method: str) -> tuple[str, float] | None:
    """``adapter.presign(url, method)`` if the adapter has that capability, else None."""
    fn = getattr(adapter, "presign", None)
    return fn(url, method) if fn is not None else None  # type: ignore[no-any-return]
