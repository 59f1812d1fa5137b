"""The one naming rule (lakemount.catalog.names): lakeFS's, with ASCII word characters and a stated limit,
checked by the catalog for repositories, branches and tags before any hook runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from lakemount.app import App
from lakemount.catalog.catalog import Catalog
from lakemount.catalog.names import NAME_MAX, is_repository_name
from lakemount.config import load
from lakemount.errors import InvalidName, NotFound

R = "named"
HOOK = b"""name: every branch
on: {pre-create-branch: {}, pre-create-tag: {}}
hooks: [{id: csv_only, type: lakemount_check, properties: {formats: [csv]}}]
"""


@pytest.fixture
def cat(tmp_path: Path) -> Catalog:
    app = App(load(env={"LAKEMOUNT_HOME": str(tmp_path / "home"), "LAKEMOUNT_CACHE_DISK_BYTES": "0"}))
    app.catalog.create_repository(R)
    return app.catalog


def test_a_long_branch_name_is_told_the_limit(cat: Catalog) -> None:
    # Before: "use letters, digits, '_' and '-', not starting with '-'": nothing about the length it broke.
    with pytest.raises(InvalidName) as err:
        cat.create_branch(R, "a" * 300, "main")
    message = str(err.value)
    assert f"1 to {NAME_MAX}" in message and "(300 characters)" in message and "^\\w[-\\w]*$" in message
    assert "\n" not in message and len(message) < 300  # one line, the name cut
    cat.create_branch(R, "a" * NAME_MAX, "main")  # the limit itself is allowed


@pytest.mark.parametrize("kind", ["branch", "tag", "repository"])
@pytest.mark.parametrize("name", ["ünïcode", "naïve", "日本語", "main\n", "ab\u0663"])
def test_non_ascii_word_characters_are_refused_as_lakefs_refuses_them(cat: Catalog, kind: str, name: str) -> None:
    # Python's \w took any letter (and $ a final newline): 'ünïcode' became a branch that lakeFS refuses.
    create = {"branch": lambda: cat.create_branch(R, name, "main"), "tag": lambda: cat.create_tag(R, name, "main"),
              "repository": lambda: cat.create_repository(name)}[kind]
    with pytest.raises(InvalidName, match=f"invalid {kind} name"):
        create()
    if kind == "branch":
        with pytest.raises(NotFound):
            cat.get_branch(R, name)


def test_one_message_per_kind_names_the_rule_and_the_limit(cat: Catalog) -> None:
    cases = [
        (lambda n: cat.create_repository(n), ["ab", "Repo", "-repo", "re_po", "a" * 64, "repo/x"], "3 to 63"),
        (lambda n: cat.create_branch(R, n, "main"), ["", "-x", "a b", "a/b", "a~1", "a^", "a@", "a$", "a:b", "a..b"], "1 to 255"),
        (lambda n: cat.create_tag(R, n, "main"), ["", "-x", ".x", "a b", "a/b", "v1..2", "v1.", "a~1", "a@", "t" * 256], "1 to 255"),
    ]
    for create, bad, limit in cases:
        messages = set()
        for name in bad:
            with pytest.raises(InvalidName) as err:
                create(name)
            messages.add(err.value.reason)
        assert len(messages) == 1 and limit in messages.pop()
    with pytest.raises(InvalidName, match="invalid branch name"):
        cat.create_repository("fine", default_branch="bad name")
    assert [r.name for r in cat.list_repositories()] == [R]
    for name in ("main-2", "_x", "f" * 40, "A_b-C"):
        cat.create_branch(R, name, "main")
    for name in ("v1.0", "release_2-rc.1"):
        cat.create_tag(R, name, "main")
    assert is_repository_name("abc") and not is_repository_name("ünï") and not is_repository_name("a.b")


def test_a_refused_name_runs_no_hook(cat: Catalog) -> None:
    # The rule is checked before the pre-create hooks, which used to receive the invalid name.
    cat.put(R, "main", "_lakefs_actions/all.yaml", HOOK)
    cat.commit(R, "main", "hooks")
    cat.create_branch(R, "good", "main")
    before = len(cat.actions.store.list_runs(R))
    assert before == 1
    for create in (lambda: cat.create_branch(R, "ünïcode", "main"), lambda: cat.create_tag(R, "t" * 300, "main")):
        with pytest.raises(InvalidName):
            create()
    assert len(cat.actions.store.list_runs(R)) == before
