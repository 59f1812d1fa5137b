"""One protection check: every front end asks ``Catalog.check_writable`` whether a branch may be written.

The API's upload and the importer used to match the rules with their own
``fnmatch`` while the mount and the gateway asked the catalog.  Here each
front end writes to ``release-1`` under the rule ``rel*`` and is refused; then
the verb is replaced by one that refuses only ``dev`` (which no rule covers):
every front end now refuses ``dev`` and takes the write to ``release-1``,
so none decides by the rules on its own.
"""

from __future__ import annotations

import base64
import errno
import json
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from lakemount.app import App
from lakemount.catalog.catalog import Catalog
from lakemount.config import load
from lakemount.errors import ProtectedBranch
from lakemount.fuse.core import FileSystem, MountOptions
from lakemount.serving.http import BytesBody, Request
from tests.fuse.pathfs import PathFS
from tests.gateway.server_fixture import ADMIN_KEY, ADMIN_SECRET, _create_admin

R = "one"


@pytest.fixture
def app(tmp_path: Path) -> App:
    home = tmp_path / "home"
    env = {"LAKEMOUNT_HOME": str(home), "LAKEMOUNT_CACHE_DISK_BYTES": "0",
           "LAKEMOUNT_BLOCKSTORE_LOCAL_IMPORT_ROOTS": str(tmp_path)}
    _create_admin(env)
    app = App(load(None, env=env))
    cat = app.catalog
    cat.create_repository(R)
    cat.put(R, "main", "seed", b"s")
    cat.commit(R, "main", "seed")
    cat.create_branch(R, "release-1", "main")
    cat.create_branch(R, "dev", "main")
    cat.protection.add(R, "rel*")
    return app


def via_api(app: App, tmp_path: Path, branch: str) -> bool:
    from lakemount.api.handler import ApiService

    auth = ("authorization", "Basic " + base64.b64encode(f"{ADMIN_KEY}:{ADMIN_SECRET}".encode()).decode())
    put = Request("POST", f"/api/v1/repositories/{R}/branches/{branch}/objects", "path=api.txt",
                  (auth, ("content-length", "1")), BytesBody(b"x"))
    resp = ApiService(app).handle(put)
    assert resp.status in (201, 403), resp.body
    if resp.status == 403:
        assert "is protected" in json.loads(resp.body)["message"]  # type: ignore[arg-type]
    return resp.status == 201


def via_gateway(app: App, tmp_path: Path, branch: str) -> bool:
    from lakemount.gateway.handler import S3Gateway
    from lakemount.gateway.settings import from_config
    from tests.gateway.test_server_core import call

    resp = call(S3Gateway(app, from_config(app.config)), "PUT", f"/{R}/{branch}/gw.txt", b"x")
    assert resp.status in (200, 403), resp.body
    if resp.status == 403:
        assert b"<Code>AccessDenied</Code>" in resp.body and b"is protected" in resp.body  # type: ignore[operator]
    return resp.status == 200


def via_import(app: App, tmp_path: Path, branch: str) -> bool:
    from lakemount.jobs.importer import import_objects

    src = tmp_path / "src"
    src.mkdir(exist_ok=True)
    (src / "imported.txt").write_bytes(b"x")
    try:
        report = import_objects(app, str(src), R, branch, engine="in-process")
    except ProtectedBranch:
        return False
    assert report["staged"] == 1
    return True


def via_mount(app: App, tmp_path: Path, branch: str) -> bool:
    home = tmp_path / "home"
    opts = MountOptions(spool_dir=str(home / "spool" / branch), recovered_dir=str(home / "recovered"), head_ttl=0.2)
    fs = FileSystem(app.catalog, app.adapter, app.cache.ram, None, opts, cache_stats=app.cache.stats)
    try:
        PathFS(fs).write_file(f"/{R}/{branch}/mounted.txt", b"x")
    except OSError as exc:
        assert exc.errno == errno.EPERM
        return False
    finally:
        fs.close()
    return True


FRONT_ENDS: dict[str, Callable[[App, Path, str], bool]] = {
    "api": via_api, "gateway": via_gateway, "import": via_import, "mount": via_mount,
}
WRITTEN = {"api": "api.txt", "gateway": "gw.txt", "import": "imported.txt", "mount": "mounted.txt"}


@pytest.fixture
def asked(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[tuple[str, str, str]]]:
    """Every call of ``Catalog.check_writable`` (repo, branch, action), the real verb still deciding."""
    calls: list[tuple[str, str, str]] = []
    real = Catalog.check_writable

    def spy(self: Catalog, repo: str, branch: str, action: str = "write") -> None:
        calls.append((repo, branch, action))
        real(self, repo, branch, action)

    monkeypatch.setattr(Catalog, "check_writable", spy)
    yield calls


@pytest.mark.parametrize("front_end", FRONT_ENDS)
def test_a_pattern_rule_refuses_the_write_in_every_front_end(
    app: App, tmp_path: Path, asked: list[tuple[str, str, str]], front_end: str
) -> None:
    write = FRONT_ENDS[front_end]
    assert not write(app, tmp_path, "release-1")
    assert (R, "release-1", "write") in asked  # the refusal came through the verb
    assert app.catalog.get_optional(R, "release-1", WRITTEN[front_end]) is None
    assert write(app, tmp_path, "dev")
    assert app.catalog.get_optional(R, "dev", WRITTEN[front_end]) is not None


@pytest.mark.parametrize("front_end", FRONT_ENDS)
def test_the_verb_alone_decides(app: App, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, front_end: str) -> None:
    def only_dev(self: Catalog, repo: str, branch: str, action: str = "write") -> None:
        if branch == "dev":
            raise ProtectedBranch(repo, branch, action, "a rule the store does not hold")

    monkeypatch.setattr(Catalog, "check_writable", only_dev)
    write = FRONT_ENDS[front_end]
    assert not write(app, tmp_path, "dev")
    assert write(app, tmp_path, "release-1")  # the stored rule rel* is nobody else's to apply
    assert app.catalog.get_optional(R, "release-1", WRITTEN[front_end]) is not None
    assert app.catalog.get_optional(R, "dev", WRITTEN[front_end]) is None
