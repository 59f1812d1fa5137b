"""``lakemount branch`` and ``lakemount tag``: verbs on refs read their URIs and print refs one way."""

from __future__ import annotations

from pathlib import Path

import pytest

from lakemount.cli.common import parse_ref_uri, ref_and_target
from lakemount.errors import InvalidArgument
from tests.cli.test_cli import js, run


def test_a_new_ref_and_its_target_are_read_once_for_branches_and_tags() -> None:
    # branch.py and tag.py each parsed URI and target, checked the repository and asserted the ref.
    assert ref_and_target("lakefs://r/dev", "lakefs://r/main~1", "elsewhere") == ("r", "dev", "main~1")
    with pytest.raises(InvalidArgument, match="^elsewhere$"):
        ref_and_target("lakefs://r/dev", "lakefs://s/main", "elsewhere")
    with pytest.raises(InvalidArgument, match="without a path"):
        ref_and_target("lakefs://r/dev", "lakefs://r/main/x", "elsewhere")
    assert parse_ref_uri("lakefs://r/v1") == ("r", "v1")
    with pytest.raises(InvalidArgument, match="without a path, got 'lakefs://r/v1/x'; use this$"):
        parse_ref_uri("lakefs://r/v1/x", "use this")


def test_branch_and_tag_verbs_print_refs_alike(tmp_path: Path) -> None:
    home = tmp_path / "home"
    run(home, "repo", "create", "lakefs://one")
    run(home, "repo", "create", "lakefs://two")
    cid = js(home, "show", "lakefs://one/main")["id"]  # type: ignore[index,call-overload]
    for args, message in [
        (("branch", "create", "lakefs://one/dev", "--source", "lakefs://two/main"), "source must be in the same repository"),
        (("tag", "create", "lakefs://one/v1", "lakefs://two/main"), "the tag and its commit must be in the same repository"),
    ]:
        p = run(home, *args, ok=False)
        assert p.returncode == 2 and message in p.stderr, p.stderr
    assert run(home, "branch", "create", "lakefs://one/dev", "--source", "lakefs://one/main").stdout == f"Created branch dev at {cid[:12]}\n"
    assert js(home, "tag", "create", "lakefs://one/v1", "lakefs://one/dev") == {"id": "v1", "commit_id": cid}
    assert js(home, "branch", "list", "lakefs://one") == [{"id": "dev", "commit_id": cid}, {"id": "main", "commit_id": cid}]
    assert run(home, "branch", "list", "lakefs://one").stdout == f"{'dev':<40} {cid[:16]}\n{'main':<40} {cid[:16]}\n"
    assert js(home, "tag", "list", "lakefs://one") == [{"id": "v1", "commit_id": cid}]
    assert run(home, "tag", "list", "lakefs://one").stdout == f"{'v1':<40} {cid}\n"
    assert run(home, "tag", "show", "lakefs://one/v1").stdout == f"v1 {cid}\n"
    assert js(home, "branch", "show", "lakefs://one/dev") == {"id": "dev", "commit_id": cid, "uncommitted_changes": False}
    for verb in ("branch", "tag"):
        p = run(home, verb, "show", f"lakefs://one/{'dev' if verb == 'branch' else 'v1'}/x", ok=False)
        assert p.returncode == 2 and "without a path" in p.stderr
