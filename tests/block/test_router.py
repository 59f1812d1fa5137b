"""RouterAdapter dispatch, join_url, and adapter_from_config."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from lakemount.block import adapter_from_config, s3_options
from lakemount.block.flaky import FlakyAdapter
from lakemount.block.local import LocalAdapter
from lakemount.block.memory import MemoryAdapter
from lakemount.block.router import RouterAdapter, join_url
from lakemount.errors import InvalidArgument
from lakemount.graveler.ports import BlockAdapter


def test_dispatch_by_scheme(tmp_path: Path) -> None:
    router = adapter_from_config({"type": "local"})
    router.put(f"local://{tmp_path}/a", b"local")
    router.put("mem://ns/a", b"mem")
    assert (tmp_path / "a").read_bytes() == b"local"
    assert router.get("mem://ns/a") == b"mem"
    assert router.get(f"LOCAL://{tmp_path}/a") == b"local"  # schemes are case-insensitive
    assert [i.url for i in router.list("mem://ns/")] == ["mem://ns/a"]


def test_put_many_hands_each_store_its_share_of_a_batch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from lakemount.block.trash import TrashFallbackAdapter

    batches: list[list[str]] = []
    real = LocalAdapter.put_many

    def recorded(self: LocalAdapter, items: list[tuple[str, bytes]]) -> None:
        batches.append([u for u, _ in items])
        real(self, items)

    monkeypatch.setattr(LocalAdapter, "put_many", recorded)
    adapter = TrashFallbackAdapter(adapter_from_config({"type": "local"}))
    items = [(f"local://{tmp_path}/l{i}", b"L%d" % i) if i % 2 else (f"mem://ns/m{i}", b"M%d" % i) for i in range(10)]
    adapter.put_many(items)  # type: ignore[attr-defined]
    assert batches == [[u for u, _ in items if u.startswith("local")]]  # one batch to the local store, in order
    assert [adapter.get(u) for u, _ in items] == [d for _, d in items]  # the memory store took its share by put


def test_copy_stays_within_one_store(tmp_path: Path) -> None:
    router = adapter_from_config({"type": "local"})
    router.put("mem://ns/a", b"mem")
    router.copy("mem://ns/a", "mem://ns/b")
    assert router.get("mem://ns/b") == b"mem"
    with pytest.raises(InvalidArgument, match="between block stores"):
        router.copy("mem://ns/a", f"local://{tmp_path}/a")
    assert not (tmp_path / "a").exists()


@pytest.mark.parametrize("url", ["gs://bucket/key", "no-scheme/key", "://x"])
def test_unknown_or_missing_scheme_is_invalid(url: str) -> None:
    router = RouterAdapter({"mem": MemoryAdapter()})
    with pytest.raises(InvalidArgument):
        router.get(url)


def test_factories_are_built_once_on_first_use() -> None:
    built: list[BlockAdapter] = []

    def make() -> BlockAdapter:
        built.append(MemoryAdapter())
        return built[-1]

    router = RouterAdapter(factories={"mem": make})
    assert not router.is_built("mem")
    router.put("mem://a/b", b"1")
    assert router.get("mem://a/b") == b"1"
    assert len(built) == 1
    assert router.is_built("mem")
    assert router.schemes == frozenset({"mem"})


def test_s3_is_lazy_and_works(s3_options: dict[str, Any], s3_bucket: str) -> None:
    cfg = {
        "type": "s3",
        "s3": {
            "endpoint": s3_options["endpoint_url"],
            "region": s3_options["region"],
            "access_key_id": s3_options["access_key_id"],
            "secret_access_key": s3_options["secret_access_key"],
        },
    }
    router = adapter_from_config(cfg)
    assert router.schemes == frozenset({"local", "mem", "s3"})
    assert not router.is_built("s3")
    router.put(f"s3://{s3_bucket}/router/k", b"v")
    assert router.is_built("s3")
    assert router.get(f"s3://{s3_bucket}/router/k") == b"v"


def test_config_validation() -> None:
    with pytest.raises(InvalidArgument):
        adapter_from_config({"type": "gcs"})
    with pytest.raises(InvalidArgument):
        adapter_from_config({"type": "s3", "s3": {"endpiont": "http://x"}})
    assert s3_options(
        {"endpoint": "http://e", "region": "", "credentials": {"access_key_id": "a", "secret_access_key": "s"}}
    ) == {"endpoint_url": "http://e", "access_key_id": "a", "secret_access_key": "s"}
    adapter_from_config({})  # defaults to local
    adapter_from_config(None)
    assert s3_options({"force_path_style": "true", "max_attempts": "3", "connect_timeout": "1.5"}) == {
        "force_path_style": True,
        "max_attempts": 3,
        "connect_timeout": 1.5,
    }
    with pytest.raises(InvalidArgument):
        s3_options({"force_path_style": "maybe"})
    with pytest.raises(InvalidArgument):
        s3_options({"max_attempts": "many"})


def test_config_of_the_composition_root_is_accepted() -> None:
    # The shape lakemount.config produces: empty strings mean "boto3's default".
    cfg = {
        "type": "local",
        "local": {"path": "/tmp/lake"},
        "default_namespace_prefix": "",
        "s3": {"endpoint": "", "region": "", "access_key_id": "", "secret_access_key": ""},
    }
    assert adapter_from_config(cfg).schemes == frozenset({"local", "mem", "s3"})


@pytest.mark.parametrize(
    ("ns", "key", "expected"),
    [
        ("s3://bucket/repo", "data/ab", "s3://bucket/repo/data/ab"),
        ("s3://bucket/repo/", "data/ab", "s3://bucket/repo/data/ab"),
        ("s3://bucket", "k", "s3://bucket/k"),
        ("local:///", "k", "local:///k"),
        ("local:///var/lake", "_lakefs/x", "local:///var/lake/_lakefs/x"),
    ],
)
def test_join_url(ns: str, key: str, expected: str) -> None:
    assert join_url(ns, key) == expected


@pytest.mark.parametrize(("ns", "key"), [("s3://b/r", ""), ("s3://b/r", "/abs"), ("no-scheme", "k")])
def test_join_url_rejects(ns: str, key: str) -> None:
    with pytest.raises(InvalidArgument):
        join_url(ns, key)


def test_every_adapter_satisfies_the_protocol(tmp_path: Path) -> None:
    # Checked by mypy (assignment to the Protocol type) and at run time (no boto3 import needed here).
    adapters: list[BlockAdapter] = [
        LocalAdapter(),
        MemoryAdapter(),
        FlakyAdapter(MemoryAdapter()),
        RouterAdapter({"mem": MemoryAdapter()}),
    ]
    for adapter in adapters:
        for op in ("put", "put_file", "get", "get_range", "open", "stat", "exists", "delete", "list"):
            assert callable(getattr(adapter, op))


def test_importing_the_package_does_not_import_boto3() -> None:
    import subprocess
    import sys

    code = (
        "import sys, lakemount.block; adapter = lakemount.block.adapter_from_config({}); print('boto3' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_put_many_puts_a_store_without_batches_several_at_a_time_and_reports_a_failure() -> None:
    """A store that takes no batch (S3, memory) gets one put per object, several in flight; a failed put
    raises once the others are done, and the others are stored."""
    import threading
    import time

    from lakemount.block.batch import PARALLEL, put_many
    from lakemount.errors import Unavailable

    inner = MemoryAdapter()
    in_flight, most = [0], [0]
    lock = threading.Lock()

    class Slow:
        def put(self, url: str, data: bytes) -> None:
            with lock:
                in_flight[0] += 1
                most[0] = max(most[0], in_flight[0])
            try:
                time.sleep(0.05)
                if url.endswith("/bad"):
                    raise Unavailable("the store is down")
                inner.put(url, data)
            finally:
                with lock:
                    in_flight[0] -= 1

    items = [(f"mem://ns/k{i}", b"%d" % i) for i in range(2 * PARALLEL)]
    put_many(Slow(), items)  # type: ignore[arg-type]
    assert [inner.get(u) for u, _ in items] == [d for _, d in items]
    assert most[0] > 1, "the puts went one at a time"
    with pytest.raises(Unavailable):
        put_many(Slow(), [("mem://ns/bad", b"x"), ("mem://ns/after", b"y")])  # type: ignore[arg-type]
    assert inner.get("mem://ns/after") == b"y"
