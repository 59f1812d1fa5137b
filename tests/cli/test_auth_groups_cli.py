"""``lakemount auth groups`` (also ``auth group``): create, members, policies, show, errors as exit codes."""

from __future__ import annotations

import os
from pathlib import Path

from lakemount.app import App
from lakemount.auth import SqlAuthStore
from lakemount.auth.policies import Action
from lakemount.config import load
from tests.cli.test_cli import js, run


def _store(home: Path) -> SqlAuthStore:
    """The auth store the CLI wrote to, read in process (what the gateway and the API consult)."""
    return App(load(None, env={**os.environ, "LAKEMOUNT_HOME": str(home)})).auth


def test_groups_through_the_cli(tmp_path: Path) -> None:
    home = tmp_path / "home"
    run(home, "auth", "users", "create", "--id", "ann")
    store = _store(home)
    created = js(home, "auth", "groups", "create", "--id", "Devs", "--description", "the developers")
    assert isinstance(created, dict)
    assert (created["id"], created["name"], created["description"]) == ("Devs", "Devs", "the developers")
    assert type(created["creation_date"]) is int
    assert run(home, "auth", "group", "create", "--id", "Readers").stdout.strip() == "Group: Readers"
    assert [g["id"] for g in js(home, "auth", "groups", "list")] == ["Devs", "Readers"]  # type: ignore[union-attr]
    assert run(home, "auth", "groups", "list", "--after", "Devs").stdout.split("\t")[0] == "Readers"

    assert not store.authorize("ann", Action.WRITE_REPO, "demo")
    run(home, "auth", "groups", "add-user", "--id", "Devs", "--user", "ann")
    run(home, "auth", "group", "attach", "--id", "Devs", "--policy", "Developer")
    assert store.authorize("ann", Action.WRITE_REPO, "demo")
    shown = js(home, "auth", "groups", "show", "--id", "Devs")
    assert isinstance(shown, dict) and shown["members"] == ["ann"] and shown["policies"] == ["Developer"]
    text = run(home, "auth", "groups", "show", "--id", "Devs").stdout
    assert "Members: ann" in text and "Policies: Developer" in text and "Description: the developers" in text
    assert [g["id"] for g in js(home, "auth", "users", "groups", "--id", "ann")] == ["Devs"]  # type: ignore[union-attr]
    assert js(home, "auth", "users", "policies", "list", "--id", "ann") == []
    assert js(home, "auth", "users", "policies", "list", "--id", "ann", "--effective") == [{"id": "Developer"}]

    # Errors: one line on stderr, the exit status of the error's category.
    dup = run(home, "auth", "groups", "add-user", "--id", "Devs", "--user", "ann", ok=False)
    assert dup.returncode == 4 and dup.stderr.strip() == "error: user ann is already a member of group Devs"
    missing = run(home, "auth", "groups", "show", "--id", "nope", ok=False)
    assert missing.returncode == 3 and missing.stderr.strip() == "error: group not found: nope"
    nouser = run(home, "auth", "groups", "add-user", "--id", "Devs", "--user", "ghost", ok=False)
    assert nouser.returncode == 3 and "user not found: ghost" in nouser.stderr
    nopolicy = run(home, "auth", "groups", "attach", "--id", "Devs", "--policy", "Nope", ok=False)
    assert nopolicy.returncode == 3 and "policy not found: Nope" in nopolicy.stderr
    bad = run(home, "auth", "groups", "create", "--id", "a b", ok=False)
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
    exists = run(home, "auth", "groups", "create", "--id", "Devs", ok=False)
    assert exists.returncode == 4 and "group already exists: Devs" in exists.stderr

    run(home, "auth", "groups", "detach", "--id", "Devs", "--policy", "Developer")
    assert not store.authorize("ann", Action.WRITE_REPO, "demo")
    run(home, "auth", "groups", "attach", "--id", "Devs", "--policy", "Developer")
    run(home, "auth", "groups", "remove-user", "--id", "Devs", "--user", "ann")
    assert not store.authorize("ann", Action.WRITE_REPO, "demo")
    gone = run(home, "auth", "groups", "remove-user", "--id", "Devs", "--user", "ann", ok=False)
    assert gone.returncode == 3
    run(home, "auth", "groups", "add-user", "--id", "Devs", "--user", "ann")
    assert js(home, "auth", "groups", "delete", "--id", "Devs") == {"deleted": "Devs"}
    assert not store.authorize("ann", Action.WRITE_REPO, "demo")
    assert js(home, "auth", "users", "groups", "--id", "ann") == []
    run(home, "auth", "groups", "add-user", "--id", "Readers", "--user", "ann")
    run(home, "auth", "users", "delete", "--id", "ann")
    assert js(home, "auth", "groups", "show", "--id", "Readers")["members"] == []  # type: ignore[index]


def test_groups_help_explains() -> None:
    home = Path("/nonexistent-lakemount-home")
    out = run(home, "auth", "groups", "--help").stdout
    assert "Every member of a group has the policies attached to the group" in out
    for verb in ("create", "delete", "list", "show", "add-user", "remove-user", "attach", "detach"):
        assert verb in out
    assert "Attach a policy to a group: every member gets it." in run(home, "auth", "group", "attach", "--help").stdout


def test_the_verbs_that_link_users_groups_and_policies_report_alike(tmp_path: Path) -> None:
    # Six verbs (a user's policies attach/detach; a group's add-user/remove-user, attach/detach) were six
    # copies of one function; they are made by one now and must say what they did as before.
    home = tmp_path / "home"
    run(home, "auth", "users", "create", "--id", "ann")
    run(home, "auth", "groups", "create", "--id", "Devs")
    assert js(home, "auth", "users", "policies", "attach", "--id", "ann", "--policy", "Developer") == {"user": "ann", "attached": "Developer"}
    assert run(home, "auth", "users", "policies", "detach", "--id", "ann", "--policy", "Developer").stdout == "Policy detached: Developer -x- ann\n"
    assert run(home, "auth", "user", "policies", "attach", "--id", "ann", "--policy", "Analyst").stdout == "Policy attached: Analyst -> ann\n"
    assert run(home, "auth", "groups", "add-user", "--id", "Devs", "--user", "ann").stdout == "User added: ann -> Devs\n"
    assert js(home, "auth", "groups", "remove-user", "--id", "Devs", "--user", "ann") == {"group": "Devs", "removed": "ann"}
    assert run(home, "auth", "groups", "attach", "--id", "Devs", "--policy", "Developer").stdout == "Policy attached: Developer -> Devs\n"
    assert js(home, "auth", "groups", "detach", "--id", "Devs", "--policy", "Developer") == {"group": "Devs", "detached": "Developer"}
    assert _store(home).list_user_policies("ann") == ["Analyst"] and _store(home).list_group_policies("Devs") == []
    missing = run(home, "auth", "groups", "attach", "--id", "Devs", ok=False)
    assert missing.returncode == 2 and "Missing option '--policy'" in missing.stderr
