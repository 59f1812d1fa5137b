"""The rule of a shared mount's access control, without a kernel (``lakemount/fuse/access.py``)."""

from __future__ import annotations

import errno
import pwd

import pytest

from lakemount.auth.policies import Action
from lakemount.errors import InvalidArgument
from lakemount.fuse.access import MountAccess, parse_users
from lakemount.fuse.errno import FsError
from tests.auth.cache_clock import CacheClock

OWNERS = frozenset({1000, 0})


def test_owners_act_as_the_mount_mapped_uids_get_their_users_policy_others_nothing() -> None:
    asked: list[tuple[str, Action, str]] = []
    allowed = {("ana", Action.READ_REPO, "sales")}

    def authorize(user: str, action: Action, repo: str) -> bool:
        asked.append((user, action, repo))
        return (user, action, repo) in allowed

    access = MountAccess({2000: "ana"}, authorize, owners=OWNERS)
    for uid in OWNERS:
        access.check(uid, "sales", True)  # no policy asked
    assert asked == []
    access.check(2000, "sales", False)
    access.check(2000, None, False)  # the mount root: any mapped user
    for uid, repo, write in ((2000, "sales", True), (2000, "hr", False), (3000, None, False), (3000, "sales", False)):
        with pytest.raises(FsError) as info:
            access.check(uid, repo, write)
        assert info.value.errno == errno.EACCES, (uid, repo, write)
    assert asked == [("ana", Action.READ_REPO, "sales"), ("ana", Action.WRITE_REPO, "sales"), ("ana", Action.READ_REPO, "hr")]


def test_a_decision_is_cached_until_the_ttl_then_a_changed_policy_applies(monkeypatch: pytest.MonkeyPatch) -> None:
    from lakemount.auth import cache

    clock = CacheClock()
    monkeypatch.setattr(cache, "time", clock)
    answers = [True]
    calls = []

    def authorize(user: str, action: Action, repo: str) -> bool:
        calls.append(repo)
        return answers[-1]

    access = MountAccess({2000: "ana"}, authorize, owners=OWNERS, ttl=0.2)
    assert access.decide(2000, "sales", False)
    assert access.cached(2000, "sales", False) is True
    answers.append(False)  # the policy is detached
    clock.t += 0.15
    assert access.decide(2000, "sales", False) and calls == ["sales"]  # within the TTL: no query
    clock.t += 0.1  # past it
    assert access.cached(2000, "sales", False) is None
    assert not access.decide(2000, "sales", False) and calls == ["sales", "sales"]


def test_the_user_mapping_reads_names_uids_and_text() -> None:
    assert parse_users({"2000": "ana"}, owners=OWNERS) == {2000: "ana"}
    assert parse_users("2000=ana, 2001=bob", owners=OWNERS) == {2000: "ana", 2001: "bob"}
    assert parse_users({"nobody": "guest"}, owners=OWNERS) == {pwd.getpwnam("nobody").pw_uid: "guest"}
    assert parse_users("", owners=OWNERS) == {}
    for raw, message in (
        ("2000", "mount.users must look like localuser=lakemountuser,..."),
        ({"no-such-user-here": "x"}, "mount.users: no local user named 'no-such-user-here'"),
        ({"1000": "x"}, "mount.users: 1000 is the mount's own user or root, which act as the mount itself"),
        ({"root": "x"}, "mount.users: root is the mount's own user or root, which act as the mount itself"),
        ({"2000": ""}, "mount.users: 2000 needs a lakemount user id"),
    ):
        with pytest.raises(InvalidArgument) as info:
            parse_users(raw, owners=OWNERS)
        assert str(info.value) == message, raw
