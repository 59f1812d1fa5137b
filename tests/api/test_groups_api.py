"""Groups through the REST API: lakeFS's generated client's AuthApi group calls, errors, and access granted by membership.

Against a live ``lakemount serve``; a membership added or removed through the
API changes what the member may do in the API and in the S3 gateway within the
decision cache's 5 seconds.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest
import requests
from botocore.exceptions import ClientError

from tests.api.conftest import Served
from tests.gateway.server_fixture import ADMIN_KEY, ADMIN_SECRET

AUTH = (ADMIN_KEY, ADMIN_SECRET)


def api(served: Served, path: str) -> str:
    return f"{served.api}/api/v1{path}"


def eventually(check: Callable[[], bool], timeout: float = 10.0) -> None:
    """Wait until ``check()`` holds (other worker processes keep decisions for 5 s)."""
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "condition never held"
        time.sleep(0.25)


def test_group_calls_through_the_generated_client(served: Served, client: Any) -> None:
    import lakefs_sdk

    auth = client.sdk_client.auth_api
    auth.create_user(lakefs_sdk.UserCreation(id="gus"))
    g = auth.create_group(lakefs_sdk.GroupCreation(id="eng", description="engineers"))
    assert (g.id, g.name, g.description) == ("eng", "eng", "engineers")
    assert g.creation_date > 0
    auth.create_group(lakefs_sdk.GroupCreation(id="eng-ops"))
    assert auth.get_group("eng").description == "engineers"
    assert [x.id for x in auth.list_groups(prefix="eng").results] == ["eng", "eng-ops"]
    page = auth.list_groups(prefix="eng", amount=1)
    assert [x.id for x in page.results] == ["eng"] and page.pagination.has_more
    assert [x.id for x in auth.list_groups(prefix="eng", after=page.pagination.next_offset).results] == ["eng-ops"]

    auth.add_group_membership("eng", "gus")
    auth.add_group_membership("eng-ops", "gus")
    assert [u.id for u in auth.list_group_members("eng").results] == ["gus"]
    assert [x.id for x in auth.list_user_groups("gus").results] == ["eng", "eng-ops"]

    auth.attach_policy_to_group("eng", "Developer")
    auth.attach_policy_to_group("eng-ops", "Analyst")
    assert [p.id for p in auth.list_group_policies("eng").results] == ["Developer"]
    assert auth.list_user_policies("gus").results == []
    assert [p.id for p in auth.list_user_policies("gus", effective=True).results] == ["Analyst", "Developer"]

    # Errors as lakeFS's client maps them.
    with pytest.raises(lakefs_sdk.exceptions.NotFoundException):
        auth.get_group("nope")
    with pytest.raises(lakefs_sdk.exceptions.NotFoundException):
        auth.add_group_membership("eng", "nobody")
    with pytest.raises(lakefs_sdk.exceptions.NotFoundException):
        auth.add_group_membership("nope", "gus")
    with pytest.raises(lakefs_sdk.exceptions.NotFoundException):
        auth.attach_policy_to_group("eng", "NoSuchPolicy")
    with pytest.raises(lakefs_sdk.exceptions.NotFoundException):
        auth.list_group_members("nope")
    with pytest.raises(lakefs_sdk.exceptions.NotFoundException):
        auth.list_user_groups("nobody")
    with pytest.raises(lakefs_sdk.exceptions.ApiException) as e:
        auth.create_group(lakefs_sdk.GroupCreation(id="eng"))
    assert e.value.status == 409
    with pytest.raises(lakefs_sdk.exceptions.ApiException) as e:
        auth.add_group_membership("eng", "gus")
    assert e.value.status == 409
    with pytest.raises(lakefs_sdk.exceptions.ApiException) as e:
        auth.attach_policy_to_group("eng", "Developer")
    assert e.value.status == 409
    with pytest.raises(lakefs_sdk.exceptions.BadRequestException):
        auth.create_group(lakefs_sdk.GroupCreation(id="no spaces"))

    auth.detach_policy_from_group("eng", "Developer")
    assert auth.list_group_policies("eng").results == []
    with pytest.raises(lakefs_sdk.exceptions.NotFoundException):
        auth.detach_policy_from_group("eng", "Developer")
    auth.delete_group_membership("eng", "gus")
    assert auth.list_group_members("eng").results == []
    with pytest.raises(lakefs_sdk.exceptions.NotFoundException):
        auth.delete_group_membership("eng", "gus")
    auth.delete_group("eng-ops")
    assert [x.id for x in auth.list_user_groups("gus").results] == []
    assert auth.list_user_policies("gus", effective=True).results == []
    with pytest.raises(lakefs_sdk.exceptions.NotFoundException):
        auth.delete_group("eng-ops")
    auth.delete_group("eng")
    auth.delete_user("gus")


def test_raw_errors_and_permissions(served: Served) -> None:
    r = requests.post(api(served, "/auth/groups"), json={"id": "g1", "colour": "red"}, auth=AUTH, timeout=30)
    assert r.status_code == 400 and r.json()["message"]
    r = requests.post(api(served, "/auth/groups"), json={"description": "no id"}, auth=AUTH, timeout=30)
    assert r.status_code == 400 and r.json()["message"]
    r = requests.get(api(served, "/auth/groups/nope"), auth=AUTH, timeout=30)
    assert r.status_code == 404 and "nope" in r.json()["message"]
    assert requests.post(api(served, "/auth/groups"), json={"id": "g1"}, auth=AUTH, timeout=30).status_code == 201
    r = requests.post(api(served, "/auth/groups"), json={"id": "g1"}, auth=AUTH, timeout=30)
    assert r.status_code == 409 and r.json()["message"]

    # ManageUsers, like the user operations; one's own groups need nothing more.
    key, secret = served.gateway.user("viewer1", "Analyst")
    v = (key, secret)
    denied = [
        ("get", "/auth/groups"),
        ("post", "/auth/groups"),
        ("get", "/auth/groups/g1"),
        ("delete", "/auth/groups/g1"),
        ("get", "/auth/groups/g1/members"),
        ("put", "/auth/groups/g1/members/viewer1"),
        ("delete", "/auth/groups/g1/members/viewer1"),
        ("get", "/auth/groups/g1/policies"),
        ("put", "/auth/groups/g1/policies/Admin"),
        ("delete", "/auth/groups/g1/policies/Admin"),
        ("get", "/auth/users/admin/groups"),
    ]
    for method, path in denied:
        kw: dict[str, Any] = {"json": {"id": "g2"}} if method == "post" else {}
        r = getattr(requests, method)(api(served, path), auth=v, timeout=30, **kw)
        assert r.status_code == 403, (method, path, r.status_code, r.text)
        assert r.json()["message"]
    assert requests.get(api(served, "/auth/users/viewer1/groups"), auth=v, timeout=30).json()["results"] == []
    assert requests.get(api(served, "/auth/groups"), timeout=30).status_code == 401
    assert requests.get(api(served, "/auth/groups/g1"), auth=AUTH, timeout=30).status_code == 200
    assert requests.delete(api(served, "/auth/groups/g1"), auth=AUTH, timeout=30).status_code == 204


def test_membership_grants_and_removal_revokes_in_api_and_gateway(served: Served, repo: Any) -> None:
    key, secret = served.gateway.user("member1")  # no policies of their own
    m = (key, secret)
    s3 = served.gateway.client(key, secret)
    listing = api(served, f"/repositories/{repo.id}/refs/main/objects/ls")

    def api_allowed() -> bool:
        return requests.get(listing, auth=m, timeout=30).status_code == 200

    def gateway_allowed() -> bool:
        try:
            s3.list_objects_v2(Bucket=repo.id, Prefix="main/")
        except ClientError as e:
            assert e.response["Error"]["Code"] == "AccessDenied"
            return False
        return True

    assert not api_allowed() and not gateway_allowed()
    assert requests.post(api(served, "/auth/groups"), json={"id": "readers"}, auth=AUTH, timeout=30).status_code == 201
    assert requests.put(api(served, "/auth/groups/readers/policies/Analyst"), auth=AUTH, timeout=30).status_code == 201
    assert requests.put(api(served, "/auth/groups/readers/members/member1"), auth=AUTH, timeout=30).status_code == 201
    eventually(api_allowed)
    eventually(gateway_allowed)
    # Reading only: the group gives Analyst, not Developer.
    r = requests.post(api(served, f"/repositories/{repo.id}/branches"), json={"name": "x", "source": "main"}, auth=m,
                      timeout=30)
    assert r.status_code == 403
    assert requests.delete(api(served, "/auth/groups/readers/members/member1"), auth=AUTH, timeout=30).status_code == 204
    eventually(lambda: not api_allowed())
    eventually(lambda: not gateway_allowed())
    # Deleting a group takes its grants away from its members too.
    assert requests.put(api(served, "/auth/groups/readers/members/member1"), auth=AUTH, timeout=30).status_code == 201
    eventually(api_allowed)
    assert requests.delete(api(served, "/auth/groups/readers"), auth=AUTH, timeout=30).status_code == 204
    eventually(lambda: not api_allowed())
    eventually(lambda: not gateway_allowed())
