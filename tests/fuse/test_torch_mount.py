"""PyTorch through the mount: a ``DataLoader`` with two worker processes reads 20,000 small files from a commit.

The files (512 B to 4 KiB of random bytes, spread over 100 directories) are
written into the repository and committed through lakemount's Python API in
the test process, on the same ``LAKEMOUNT_HOME`` the mount uses; then a root
mount serves them under ``<repo>/<commit-id>/`` (read-only, immutable) and
every byte that the workers read is checked against its sha256.
"""

from __future__ import annotations

import hashlib
import os
import random
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from lakemount.app import App
from lakemount.graveler.model import FILE_MODE, Entry
from tests.fuse.conftest import REPO
from tests.fuse.mounting import mounted_points, needs_fuse, start, stop

pytestmark = [
    *needs_fuse,
    pytest.mark.slow,
    pytest.mark.timeout(300),
    pytest.mark.filterwarnings("ignore:Failed to initialize NumPy"),  # torch without numpy: tensors are not used here
]

N_FILES = 20_000
N_DIRS = 100
BATCH = 2_000


def content(i: int, rng: random.Random) -> bytes:
    """512 B to 4 KiB, unique per file (its index closes it)."""
    return rng.randbytes(rng.randint(508, 4092)) + i.to_bytes(4, "big")


def write_and_commit(app: App) -> tuple[str, dict[str, str]]:
    """Stage N_FILES files and commit them; returns the commit id and {path: sha256}.

    The block store fsyncs every object and its directory; threads overlap
    those waits (20,000 one after the other take minutes on a busy machine).
    """
    rng = random.Random(20_000)
    datas = {f"train/d{i % N_DIRS:03d}/sample-{i:05d}.bin": content(i, rng) for i in range(N_FILES)}
    now = time.time_ns()
    with ThreadPoolExecutor(32) as pool:
        infos = list(pool.map(lambda data: app.catalog.write_data(REPO, data), datas.values()))
    changes: list[tuple[str, Entry | None]] = [
        (path, Entry(info.address, info.size, info.etag, now, "", (), FILE_MODE, 0, 0))
        for path, info in zip(datas, infos, strict=True)
    ]
    for start_at in range(0, len(changes), BATCH):
        app.catalog.apply(REPO, "main", changes[start_at : start_at + BATCH])
    commit = app.graveler.commit(REPO, "main", f"{N_FILES} samples")
    return commit.commit.id, {path: hashlib.sha256(data).hexdigest() for path, data in datas.items()}


class FilesDataset:
    """Reads one file per index; returns (index, sha256 of its bytes, size)."""

    def __init__(self, root: str, paths: list[str]) -> None:
        self.root = root
        self.paths = paths

    def __len__(self) -> int:
        return len(self.paths)

    def __getitem__(self, index: int) -> tuple[int, str, int]:
        with open(os.path.join(self.root, self.paths[index]), "rb") as f:
            data = f.read()
        return index, hashlib.sha256(data).hexdigest(), len(data)


def collate(batch: list[tuple[int, str, int]]) -> list[tuple[int, str, int]]:
    return batch


def test_dataloader_reads_every_byte_of_20000_files_from_a_commit(
    app: App, home: str, tmp_path: os.PathLike[str]
) -> None:
    try:
        import torch.utils.data
    except ImportError as exc:  # the test extra pins torch==2.13.0 (CPU); without it there is nothing to drive
        pytest.skip(f"PyTorch is not importable ({exc}); install the test extra (torch==2.13.0)")

    t0 = time.monotonic()
    commit_id, expected = write_and_commit(app)
    t_write = time.monotonic() - t0
    m = start(home, os.path.join(os.fspath(tmp_path), "mnt"))
    try:
        root = f"{m.mountpoint}/{REPO}/{commit_id}"
        paths = sorted(expected)
        loader = torch.utils.data.DataLoader(
            FilesDataset(root, paths),
            batch_size=64,
            num_workers=2,
            collate_fn=collate,
            shuffle=True,
            generator=torch.Generator().manual_seed(0),
        )
        t1 = time.monotonic()
        seen: set[int] = set()
        for batch in loader:
            for index, digest, size in batch:
                assert digest == expected[paths[index]], (paths[index], size)
                seen.add(index)
        t_read = time.monotonic() - t1
        assert seen == set(range(N_FILES))
        # the listing of the commit matches too
        assert len(os.listdir(f"{root}/train")) == N_DIRS
        print(
            f"staged+committed {N_FILES} files in {t_write:.1f}s; DataLoader read them in {t_read:.1f}s "
            f"({N_FILES / t_read:.0f} files/s)"
        )
    finally:
        try:
            stop(m)
        finally:
            print(f"--- log of {m.mountpoint} ---\n{m.log()}")
    assert not [p for p in mounted_points() if p.startswith(os.fspath(tmp_path))]
