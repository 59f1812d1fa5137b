"""``lakemount up``'s mount service: the child gets the configuration, secrets included, without a file (issue 10)."""

from __future__ import annotations

import os
import stat

import pytest

from lakemount.app import App
from lakemount.config import load
from lakemount.fuse import runner, service
from tests.fuse.mounting import cleanup_mountpoint, needs_fuse

SECRET_KEY = "auth-secret-8c1f0e2d"
SECRET_S3 = "s3-secret-51b7a9c4"


def _files_holding(secret: str, *roots: str) -> list[str]:
    found = []
    for root in roots:
        for dirpath, _dirs, names in os.walk(root):
            for name in names:
                path = os.path.join(dirpath, name)
                try:
                    if not stat.S_ISREG(os.lstat(path).st_mode):
                        continue
                    with open(path, "rb") as f:
                        if secret.encode() in f.read():
                            found.append(path)
                except OSError:
                    continue
    return found


def test_config_pipe_holds_the_effective_configuration(home: str, tmp_path: os.PathLike[str], monkeypatch: pytest.MonkeyPatch) -> None:
    config_file = os.path.join(os.fspath(tmp_path), "lakemount.yaml")
    with open(config_file, "w") as f:
        f.write(f"blockstore:\n  s3:\n    secret_access_key: {SECRET_S3}\nmount:\n  head_ttl: 0.3\n")
    monkeypatch.setenv("LAKEMOUNT_AUTH_ENCRYPT_SECRET_KEY", SECRET_KEY)
    app = App.from_config(config_file)
    r = service.config_pipe(app)
    try:
        # What the child does with --config /dev/fd/N, here without the environment or the file.
        os.unlink(config_file)
        assert load(f"/dev/fd/{r}", env={"LAKEMOUNT_HOME": home}) == app.config
    finally:
        os.close(r)


@needs_fuse[0]
@needs_fuse[1]
def test_up_mount_gets_secrets_without_a_file(home: str, tmp_path: os.PathLike[str], monkeypatch: pytest.MonkeyPatch) -> None:
    base = os.fspath(tmp_path)
    mp = os.path.join(base, "up-mnt")
    cache_dir = os.path.join(base, "cache-from-file")
    config_file = os.path.join(base, "lakemount.yaml")
    with open(config_file, "w") as f:
        f.write(f"blockstore:\n  s3:\n    secret_access_key: {SECRET_S3}\ncache:\n  dir: {cache_dir}\n")
    monkeypatch.setenv("LAKEMOUNT_MOUNT_PATH", mp)
    monkeypatch.setenv("LAKEMOUNT_AUTH_ENCRYPT_SECRET_KEY", SECRET_KEY)
    # A file an older version left behind, world-readable, secrets inside.
    old = os.path.join(home, "run", "up-config.yaml")
    os.makedirs(os.path.dirname(old))
    with open(old, "w") as f:
        f.write(f"auth:\n  encrypt:\n    secret_key: {SECRET_KEY}\n")
    os.chmod(old, 0o644)
    app = App.from_config(config_file)
    app.catalog.create_repository("demo")
    app.catalog.put("demo", "main", "hello", b"hi")
    os.unlink(config_file)  # the child cannot read it: it must get the configuration from up
    try:
        service.start_for_up(app)
        with open(f"{mp}/demo/main/hello", "rb") as f:
            assert f.read() == b"hi"
        assert os.path.isdir(cache_dir), "the mount did not get cache.dir from up's configuration file"
        assert not os.path.exists(old)
        assert _files_holding(SECRET_KEY, home, base) == []
        assert _files_holding(SECRET_S3, home, base) == []
        service.stop_for_up(app)
        assert runner.find_mount(mp) is None
        assert _files_holding(SECRET_KEY, home, base) == []
        assert _files_holding(SECRET_S3, home, base) == []
    finally:
        service.stop_for_up(app)
        cleanup_mountpoint(mp)
