"""Issue 23 items 1 and 2 through the REST API: no user reaches the server's own files.

Item 1: ``importStart`` read any local directory for anyone with write rights
(a Developer imported a root-only file and read it).  Now it needs the action
``ImportFromStorage`` (Admin's alone by default) besides ``WriteRepo``, and a
local source must lie under ``blockstore.local.import_roots`` once symlinks and
``..`` are resolved, whoever asks.  Item 2: ``createRepository`` took
``local:///etc`` (201, and wrote ``/etc/_lakefs`` as root) and namespaces inside
or around another repository's.  Each refusal is one line that repeats what
the user typed and nothing the server resolved.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

from lakemount.auth.policies import Effect, Policy, Statement
from tests.api.conftest import Served, running
from tests.gateway.server_fixture import ADMIN_KEY, ADMIN_SECRET

ADMIN = (ADMIN_KEY, ADMIN_SECRET)
SECRET = b"root-only secret\n"


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """A server whose imports may read ``<tmp>/in`` only; ``<tmp>/secret`` holds a 0600 file outside it."""
    tmp = tmp_path_factory.mktemp("confine")
    (tmp / "in" / "ok").mkdir(parents=True)
    (tmp / "in" / "ok" / "a.txt").write_bytes(b"a\n")
    (tmp / "secret").mkdir()
    (tmp / "secret" / "shadow").write_bytes(SECRET)
    os.chmod(tmp / "secret" / "shadow", 0o600)
    (tmp / "in" / "link").symlink_to(tmp / "secret")  # inside the root, leading out of it
    with running(tmp, env={"LAKEMOUNT_BLOCKSTORE_LOCAL_IMPORT_ROOTS": str(tmp / "in")}) as s:
        yield s
        log = s.gateway.log()
    assert "unexpected error serving" not in log, log[-5000:]


def api(served: Served, path: str) -> str:
    return f"{served.api}/api/v1{path}"


def one_line_error(resp: requests.Response, status: int) -> str:
    assert resp.status_code == status, (resp.status_code, resp.text)
    message = resp.json()["message"]
    assert isinstance(message, str) and message and "\n" not in message
    return message


def start_import(served: Served, auth: tuple[str, str], repo: str, source: str) -> requests.Response:
    body = {"paths": [{"type": "common_prefix", "path": source, "destination": "stolen/"}],
            "commit": {"message": "import"}}
    return requests.post(api(served, f"/repositories/{repo}/branches/main/import"), json=body, auth=auth, timeout=60)


def objects(served: Served, repo: str) -> list[str]:
    resp = requests.get(api(served, f"/repositories/{repo}/refs/main/objects/ls"), auth=ADMIN, timeout=60)
    resp.raise_for_status()
    return [o["path"] for o in resp.json()["results"]]


def tmp_of(served: Served) -> Path:
    return served.home.parent


def test_item1_import_needs_import_from_storage_beyond_write_rights(served: Served, repo: Any) -> None:
    tmp = tmp_of(served)
    dev = served.gateway.user("dev-importless", "Developer")
    # Write rights are there: the Developer may upload...
    up = requests.post(api(served, f"/repositories/{repo.id}/branches/main/objects?path=mine.txt"), data=b"x",
                       auth=dev, timeout=60)
    assert up.status_code == 201, up.text
    # ...but not import, neither the secret (the reported hole) nor a directory the roots allow, and the
    # refusal comes before anything about the source is looked at.
    records = sorted((served.home / "imports").glob("*.json"))
    for source in (f"local://{tmp}/secret/", f"local://{tmp}/in/ok/", f"local://{tmp}/no-such-dir/"):
        message = one_line_error(start_import(served, dev, repo.id, source), 403)
        assert "ImportFromStorage" in message and str(tmp) not in message
    assert sorted((served.home / "imports").glob("*.json")) == records  # no import was started
    assert objects(served, repo.id) == ["mine.txt"]

    # The action alone grants it: a Developer with ImportFromStorage on this repository gets past the
    # policies, and then meets the roots like anyone.
    store = served.gateway.app().auth
    store.create_policy(Policy("ImportHere", (Statement(Effect.ALLOW, ("ImportFromStorage",), repo.id),)))
    importer = served.gateway.user("dev-importer", "Developer", "ImportHere")
    message = one_line_error(start_import(served, importer, repo.id, f"local://{tmp}/secret/"), 400)
    assert "outside the directories blockstore.local.import_roots allows" in message
    other = served.repo()  # the policy names one repository
    one_line_error(start_import(served, importer, other.id, f"local://{tmp}/in/ok/"), 403)


def test_item1_import_outside_the_roots_is_400_even_for_an_admin(served: Served, repo: Any) -> None:
    tmp = tmp_of(served)
    for source in (
        f"local://{tmp}/secret/",  # plainly outside
        f"local://{tmp}/in/../secret/",  # '..' resolved before the check
        f"local://{tmp}/in/link/",  # a symlink inside the root that leads out of it
        f"local://{tmp}/in/link/../../secret/",
        f"local://{tmp}/nothing-here/",  # outside and missing: the same answer, no oracle of what exists
        "local:///etc/",
    ):
        message = one_line_error(start_import(served, ADMIN, repo.id, source), 400)
        assert message == f"import source {source} is outside the directories blockstore.local.import_roots allows"
    assert objects(served, repo.id) == []
    # Inside the roots the import starts (what it then does: tests/api/test_import.py).
    assert start_import(served, ADMIN, repo.id, f"local://{tmp}/in/ok/").status_code == 202


def test_item2_a_namespace_outside_the_roots_is_400_and_nothing_is_written(served: Served) -> None:
    tmp = tmp_of(served)
    dev = served.gateway.user("dev-creator", "Developer")
    etc_marker = Path("/etc/_lakefs")
    had_marker = etc_marker.exists()
    escape = served.home / "data" / "escape"
    escape.parent.mkdir(exist_ok=True)
    escape.symlink_to(tmp / "elsewhere-by-link", target_is_directory=True)
    (tmp / "elsewhere-by-link").mkdir()
    for i, ns in enumerate((
        "local:///etc",
        f"local://{tmp}/elsewhere",
        f"local://{served.home}/data/../../elsewhere",
        f"local://{escape}/ns",
    )):
        resp = requests.post(api(served, "/repositories"), json={"name": f"outside{i}", "storage_namespace": ns},
                             auth=dev, timeout=60)
        message = one_line_error(resp, 400)
        assert message == f"storage namespace {ns} is outside the directories blockstore.local.namespace_roots allows"
    assert etc_marker.exists() == had_marker
    assert not (tmp / "elsewhere").exists() and list((tmp / "elsewhere-by-link").iterdir()) == []
    names = [r["id"] for r in requests.get(api(served, "/repositories"), auth=ADMIN, timeout=60).json()["results"]]
    assert not any(n.startswith("outside") for n in names)


def test_item2_a_namespace_inside_or_around_another_is_400(served: Served) -> None:
    dev = served.gateway.user("dev-nester", "Developer")
    base = f"local://{served.home}/data/nest"

    def create(name: str, ns: str) -> requests.Response:
        return requests.post(api(served, "/repositories"), json={"name": name, "storage_namespace": ns}, auth=dev,
                             timeout=60)

    assert create("nest-a", f"{base}/a").status_code == 201
    message = one_line_error(create("nest-inner", f"{base}/a/inner"), 400)
    assert message == f"storage namespace {base}/a/inner is inside another repository's storage namespace"
    message = one_line_error(create("nest-around", base), 400)
    assert message == f"storage namespace {base} contains another repository's storage namespace"
    message = one_line_error(create("nest-sys", f"local://{served.home}/data/_system/x"), 400)
    assert message.endswith("is inside the server's own store")
    one_line_error(create("nest-same", f"{base}/a/"), 409)  # the same namespace: taken, as before
    # Only whole path segments nest: a sibling whose name merely starts the same is fine.
    assert create("nest-ab", f"{base}/ab").status_code == 201
    # Re-creating an existing repository is still "exists", whatever namespace is sent (exist_ok in the SDK).
    one_line_error(create("nest-a", "local:///etc"), 409)
