"""``lakemount recover`` after losing the SQLite file restores the same history and listings."""

from __future__ import annotations

import json
import os
from pathlib import Path

from tests.cli.test_cli import js, run


def snapshot(home: Path) -> dict[str, object]:
    out: dict[str, object] = {}
    for repo in ("alpha", "beta"):
        for ref in [b["id"] for b in js(home, "branch", "list", f"lakefs://{repo}")] + [  # type: ignore[union-attr,index]
            t["id"] for t in js(home, "tag", "list", f"lakefs://{repo}")  # type: ignore[union-attr,index]
        ]:
            out[f"{repo}/{ref}/log"] = js(home, "log", f"lakefs://{repo}/{ref}")
            out[f"{repo}/{ref}/ls"] = js(home, "fs", "ls", f"lakefs://{repo}/{ref}/", "-r")
    return out


def test_recover_after_deleting_sqlite(tmp_path: Path) -> None:
    home = tmp_path / "home"
    f = tmp_path / "f"
    for repo in ("alpha", "beta"):
        run(home, "repo", "create", f"lakefs://{repo}")
        for i in range(3):
            f.write_bytes(f"{repo}-{i}".encode())
            run(home, "fs", "upload", f"lakefs://{repo}/main/d/{i}.txt", "--source", str(f))
            run(home, "commit", f"lakefs://{repo}/main", "-m", f"c{i}")
    run(home, "branch", "create", "lakefs://alpha/dev", "--source", "lakefs://alpha/main~1")
    f.write_bytes(b"dev")
    run(home, "fs", "upload", "lakefs://alpha/dev/dev.txt", "--source", str(f))
    run(home, "commit", "lakefs://alpha/dev", "-m", "dev work")
    run(home, "merge", "lakefs://alpha/dev", "lakefs://alpha/main")
    run(home, "tag", "create", "lakefs://alpha/v1", "lakefs://alpha/main~1")
    run(home, "branch", "create", "lakefs://beta/gone", "--source", "lakefs://beta/main")
    run(home, "branch", "delete", "lakefs://beta/gone", "-y")
    before = snapshot(home)

    for name in os.listdir(home):
        if name.startswith("lakemount.db"):
            os.unlink(home / name)
    report = json.loads(run(home, "recover", "--json").stdout)
    assert report["warnings"] == [] and {r["name"] for r in report["repositories"]} == {"alpha", "beta"}
    assert snapshot(home) == before
    assert run(home, "fs", "cat", "lakefs://alpha/main/dev.txt").stdout == "dev"
    # A second recover into a populated store is refused, and changes nothing.
    p = run(home, "recover", ok=False)
    assert p.returncode != 0 and len(p.stderr.strip().splitlines()) == 1
    assert snapshot(home) == before
