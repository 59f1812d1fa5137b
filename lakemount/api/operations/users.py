"""Users, credentials, policies and groups as lakemount's RBAC maps onto lakeFS's auth API.

Policies attach to users directly and to groups, whose members all get
them; a user's effective policies are their own and their groups'.  A policy
statement is shown in lakeFS's shape (``effect`` allow/deny, ``action`` list,
``resource``) with lakemount's action names (``ReadRepo``, ``WriteRepo``,
``CreateRepo``, ``DeleteRepo``, ``ImportFromStorage``, ``ManageUsers``, ``ManageOwnCredentials`` or
``*``) and a resource that is ``*`` or a repository name pattern; resources
in lakeFS's ARN form ``arn:lakefs:fs:::repository/NAME`` are accepted.
Managing users, groups and policies needs ``ManageUsers``; a user may read
their own record, policies and groups, and list, create and delete their own
credentials with ``ManageOwnCredentials``.
"""

from __future__ import annotations

from typing import Any, Final

from lakemount.api.context import Ctx, empty, json_response
from lakemount.api.errors import bad_request
from lakemount.api.pagination import after_filter, paginate
from lakemount.api.routing import PAGINATION, Param, operation
from lakemount.auth.policies import Action, Effect, Policy, Statement
from lakemount.catalog.shapes import group_json
from lakemount.serving.http import Response

TAG = "auth"
ARN_REPO: Final = "arn:lakefs:fs:::repository/"


def user_json(u: Any) -> dict[str, Any]:
    """A user in lakeFS's ``User`` shape (id, creation date in epoch seconds, friendly name = id)."""
    return {"id": u.id, "creation_date": int(u.created_at.timestamp()), "friendly_name": u.id}


def _cred_json(c: Any) -> dict[str, Any]:
    return {"access_key_id": c.access_key_id, "creation_date": int(c.created_at.timestamp())}


def _store(ctx: Ctx) -> Any:
    return ctx.service.app.auth


def _manage(ctx: Ctx) -> None:
    ctx.require(Action.MANAGE_USERS)


def _own_or_manage(ctx: Ctx, user_id: str) -> None:
    if user_id == ctx.user and ctx.allowed(Action.MANAGE_OWN_CREDENTIALS):
        return
    ctx.require(Action.MANAGE_USERS)


def policy_json(p: Policy) -> dict[str, Any]:
    """A policy in lakeFS's ``Policy`` shape; repository resources are shown in ARN form."""
    return {
        "id": p.name,
        "statement": [
            {"effect": s.effect.value.lower(), "action": list(s.actions),
             "resource": s.resource if s.resource == "*" else ARN_REPO + s.resource}
            for s in p.statements
        ],
    }


def _policy_from(body: dict[str, Any]) -> Policy:
    statements = []
    for s in body["statement"]:
        resource = s["resource"]
        if resource.startswith(ARN_REPO):
            resource = resource[len(ARN_REPO) :]
        elif resource != "*" and resource.startswith("arn:"):
            raise bad_request(f"unsupported resource {resource!r}: use * or {ARN_REPO}NAME")
        if s.get("condition"):
            raise bad_request("policy conditions are not supported")
        statements.append(Statement(Effect(s["effect"].capitalize()), tuple(s["action"]), resource))
    return Policy(body["id"], tuple(statements))


def _page(ctx: Ctx, items: list[Any], key: Any, render: Any) -> Response:
    chosen = after_filter(sorted(items, key=key), key, prefix=ctx.q("prefix") or "", after=ctx.q("after") or "")
    return json_response(200, paginate(chosen, ctx.page_size(), key, render))


# --- users ---------------------------------------------------------------------------


@operation("GET", "/auth/users", "listUsers", tag=TAG, summary="users", params=PAGINATION, response="UserList", errors=(400, 401, 403))
def list_users(ctx: Ctx) -> Response:
    """listUsers: users by id after ``after``/under ``prefix``, a page of ``amount``; 403 without ManageUsers."""
    _manage(ctx)
    return _page(ctx, _store(ctx).list_users(), lambda u: u.id, user_json)


@operation("POST", "/auth/users", "createUser", tag=TAG, summary="create a user", body="UserCreation", response="User",
           status=201, errors=(400, 401, 403, 409))
def create_user(ctx: Ctx) -> Response:
    """createUser: create user ``id`` (201); 400 for ``invite_user``, 409 if it exists, 403 without ManageUsers."""
    _manage(ctx)
    body = ctx.json_body()
    if body.get("invite_user"):
        raise bad_request("inviting users by email is not supported")
    u = _store(ctx).create_user(body["id"])
    return json_response(201, user_json(u))


@operation("GET", "/auth/users/{userId}", "getUser", tag=TAG, summary="a user", response="User", errors=(400, 401, 403, 404))
def get_user(ctx: Ctx) -> Response:
    """getUser: one user; another user than oneself needs ManageUsers (403), 404 if unknown."""
    if ctx.params["userId"] != ctx.user:
        _manage(ctx)
    return json_response(200, user_json(_store(ctx).get_user(ctx.params["userId"])))


@operation("DELETE", "/auth/users/{userId}", "deleteUser", tag=TAG, summary="delete a user with their credentials",
           status=204, errors=(400, 401, 403, 404))
def delete_user(ctx: Ctx) -> Response:
    """deleteUser: delete a user and their credentials (204) and drop cached auth; 403 without ManageUsers, 404 if unknown."""
    _manage(ctx)
    _store(ctx).delete_user(ctx.params["userId"])
    ctx.auth.forget()
    return empty(204)


# --- credentials ---------------------------------------------------------------------


@operation("GET", "/auth/users/{userId}/credentials", "listUserCredentials", tag=TAG, summary="a user's access keys",
           params=PAGINATION, response="CredentialsList", errors=(400, 401, 403, 404))
def list_credentials(ctx: Ctx) -> Response:
    """listUserCredentials: a page of a user's access keys (no secrets); 403 unless ManageUsers or one's own with ManageOwnCredentials."""
    _own_or_manage(ctx, ctx.params["userId"])
    return _page(ctx, _store(ctx).list_credentials(ctx.params["userId"]), lambda c: c.access_key_id, _cred_json)


@operation("POST", "/auth/users/{userId}/credentials", "createCredentials", tag=TAG,
           summary="a new access key (its secret is shown only here)", response="CredentialsWithSecret", status=201,
           errors=(400, 401, 403, 404))
def create_credentials(ctx: Ctx) -> Response:
    """createCredentials: a new access key for the user, the only response carrying its secret (201); same rights as listUserCredentials."""
    _own_or_manage(ctx, ctx.params["userId"])
    c = _store(ctx).create_credentials(ctx.params["userId"])
    return json_response(201, {"access_key_id": c.access_key_id, "secret_access_key": c.secret_access_key,
                               "creation_date": int(c.created_at.timestamp()), "user_name": c.user_id})


@operation("GET", "/auth/users/{userId}/credentials/{accessKeyId}", "getCredentials", tag=TAG,
           summary="one access key (no secret)", response="Credentials", errors=(400, 401, 403, 404))
def get_credentials(ctx: Ctx) -> Response:
    """getCredentials: one access key (no secret); 404 if the key is unknown or belongs to another user."""
    _own_or_manage(ctx, ctx.params["userId"])
    c = _store(ctx).get_credentials(ctx.params["accessKeyId"])
    if c.user_id != ctx.params["userId"]:
        from lakemount.auth.model import CredentialsNotFound

        raise CredentialsNotFound(ctx.params["accessKeyId"])
    return json_response(200, _cred_json(c))


@operation("DELETE", "/auth/users/{userId}/credentials/{accessKeyId}", "deleteCredentials", tag=TAG,
           summary="delete an access key", status=204, errors=(400, 401, 403, 404))
def delete_credentials(ctx: Ctx) -> Response:
    """deleteCredentials: delete an access key (204) and drop cached auth; same rights as listUserCredentials, 404 if unknown."""
    _own_or_manage(ctx, ctx.params["userId"])
    _store(ctx).delete_credentials(ctx.params["userId"], ctx.params["accessKeyId"])
    ctx.auth.forget()
    return empty(204)


# --- policies ------------------------------------------------------------------------


@operation("GET", "/auth/policies", "listPolicies", tag=TAG, summary="built-in and custom policies", params=PAGINATION,
           response="PolicyList", errors=(400, 401, 403))
def list_policies(ctx: Ctx) -> Response:
    """listPolicies: a page of built-in and custom policies by name; 403 without ManageUsers."""
    _manage(ctx)
    return _page(ctx, _store(ctx).list_policies(), lambda p: p.name, policy_json)


@operation("POST", "/auth/policies", "createPolicy", tag=TAG, summary="create a custom policy", body="Policy",
           response="Policy", status=201, errors=(400, 401, 403, 409))
def create_policy(ctx: Ctx) -> Response:
    """createPolicy: store a custom policy (201); 400 for conditions or non-repository ARNs, 409 if the name exists, 403 without ManageUsers."""
    _manage(ctx)
    policy = _policy_from(ctx.json_body())
    _store(ctx).create_policy(policy)
    return json_response(201, policy_json(policy))


@operation("GET", "/auth/policies/{policyId}", "getPolicy", tag=TAG, summary="a policy", response="Policy",
           errors=(400, 401, 403, 404))
def get_policy(ctx: Ctx) -> Response:
    """getPolicy: one policy; 403 without ManageUsers, 404 if unknown."""
    _manage(ctx)
    return json_response(200, policy_json(_store(ctx).get_policy(ctx.params["policyId"])))


@operation("DELETE", "/auth/policies/{policyId}", "deletePolicy", tag=TAG, summary="delete a custom policy",
           status=204, errors=(400, 401, 403, 404))
def delete_policy(ctx: Ctx) -> Response:
    """deletePolicy: delete a custom policy (204) and drop cached auth; 403 without ManageUsers, 404 if unknown."""
    _manage(ctx)
    _store(ctx).delete_policy(ctx.params["policyId"])
    ctx.auth.forget()
    return empty(204)


@operation("GET", "/auth/users/{userId}/policies", "listUserPolicies", tag=TAG, summary="policies attached to a user",
           params=(*PAGINATION, Param("effective", "boolean")), response="PolicyList", errors=(400, 401, 403, 404))
def list_user_policies(ctx: Ctx) -> Response:
    """listUserPolicies: a page of the policies attached to a user (``effective``: also through their groups, each once).

    Another user than oneself needs ManageUsers (403); 404 for an unknown user.
    """
    if ctx.params["userId"] != ctx.user:
        _manage(ctx)
    store = _store(ctx)
    user_id = ctx.params["userId"]
    names = store.effective_policy_names(user_id) if ctx.q_bool("effective") else store.list_user_policies(user_id)
    policies = [store.get_policy(n) for n in names]
    return _page(ctx, policies, lambda p: p.name, policy_json)


@operation("PUT", "/auth/users/{userId}/policies/{policyId}", "attachPolicyToUser", tag=TAG,
           summary="attach a policy to a user", status=201, errors=(400, 401, 403, 404, 409))
def attach_policy(ctx: Ctx) -> Response:
    """attachPolicyToUser: attach a policy to a user (201) and drop cached auth; 403 without ManageUsers, 404/409 from the store."""
    _manage(ctx)
    _store(ctx).attach_policy(ctx.params["userId"], ctx.params["policyId"])
    ctx.auth.forget()
    return empty(201)


@operation("DELETE", "/auth/users/{userId}/policies/{policyId}", "detachPolicyFromUser", tag=TAG,
           summary="detach a policy from a user", status=204, errors=(400, 401, 403, 404))
def detach_policy(ctx: Ctx) -> Response:
    """detachPolicyFromUser: detach a policy from a user (204) and drop cached auth; 403 without ManageUsers, 404 if not attached."""
    _manage(ctx)
    _store(ctx).detach_policy(ctx.params["userId"], ctx.params["policyId"])
    ctx.auth.forget()
    return empty(204)


# --- groups --------------------------------------------------------------------------


@operation("GET", "/auth/groups", "listGroups", tag=TAG, summary="groups", params=PAGINATION, response="GroupList",
           errors=(400, 401, 403))
def list_groups(ctx: Ctx) -> Response:
    """listGroups: groups by id after ``after``/under ``prefix``, a page of ``amount``; 403 without ManageUsers."""
    _manage(ctx)
    return _page(ctx, _store(ctx).list_groups(), lambda g: g.id, group_json)


@operation("POST", "/auth/groups", "createGroup", tag=TAG, summary="create a group", body="GroupCreation",
           response="Group", status=201, errors=(400, 401, 403, 409))
def create_group(ctx: Ctx) -> Response:
    """createGroup: create group ``id`` with an optional ``description`` (201); 400 for a bad id, 409 if it exists, 403 without ManageUsers."""
    _manage(ctx)
    body = ctx.json_body()
    g = _store(ctx).create_group(body["id"], body.get("description") or "")
    return json_response(201, group_json(g))


@operation("GET", "/auth/groups/{groupId}", "getGroup", tag=TAG, summary="a group", response="Group",
           errors=(400, 401, 403, 404))
def get_group(ctx: Ctx) -> Response:
    """getGroup: one group; 403 without ManageUsers, 404 if unknown."""
    _manage(ctx)
    return json_response(200, group_json(_store(ctx).get_group(ctx.params["groupId"])))


@operation("DELETE", "/auth/groups/{groupId}", "deleteGroup", tag=TAG,
           summary="delete a group with its memberships and policy attachments", status=204, errors=(400, 401, 403, 404))
def delete_group(ctx: Ctx) -> Response:
    """deleteGroup: delete a group, its memberships and attachments (204) and drop cached auth; 403 without ManageUsers, 404 if unknown."""
    _manage(ctx)
    _store(ctx).delete_group(ctx.params["groupId"])
    ctx.auth.forget()
    return empty(204)


@operation("GET", "/auth/groups/{groupId}/members", "listGroupMembers", tag=TAG, summary="a group's members",
           params=PAGINATION, response="UserList", errors=(400, 401, 403, 404))
def list_group_members(ctx: Ctx) -> Response:
    """listGroupMembers: a page of the group's members by id; 403 without ManageUsers, 404 if the group is unknown."""
    _manage(ctx)
    return _page(ctx, _store(ctx).list_members(ctx.params["groupId"]), lambda u: u.id, user_json)


@operation("PUT", "/auth/groups/{groupId}/members/{userId}", "addGroupMembership", tag=TAG,
           summary="add a user to a group", status=201, errors=(400, 401, 403, 404, 409))
def add_group_membership(ctx: Ctx) -> Response:
    """addGroupMembership: make the user a member (201) and drop cached auth; 404 for an unknown group or user, 409 if already a member."""
    _manage(ctx)
    _store(ctx).add_member(ctx.params["groupId"], ctx.params["userId"])
    ctx.auth.forget()
    return empty(201)


@operation("DELETE", "/auth/groups/{groupId}/members/{userId}", "deleteGroupMembership", tag=TAG,
           summary="remove a user from a group", status=204, errors=(400, 401, 403, 404))
def delete_group_membership(ctx: Ctx) -> Response:
    """deleteGroupMembership: remove the user from the group (204) and drop cached auth; 404 if not a member."""
    _manage(ctx)
    _store(ctx).remove_member(ctx.params["groupId"], ctx.params["userId"])
    ctx.auth.forget()
    return empty(204)


@operation("GET", "/auth/groups/{groupId}/policies", "listGroupPolicies", tag=TAG, summary="policies attached to a group",
           params=PAGINATION, response="PolicyList", errors=(400, 401, 403, 404))
def list_group_policies(ctx: Ctx) -> Response:
    """listGroupPolicies: a page of the policies attached to a group; 403 without ManageUsers, 404 if the group is unknown."""
    _manage(ctx)
    store = _store(ctx)
    policies = [store.get_policy(n) for n in store.list_group_policies(ctx.params["groupId"])]
    return _page(ctx, policies, lambda p: p.name, policy_json)


@operation("PUT", "/auth/groups/{groupId}/policies/{policyId}", "attachPolicyToGroup", tag=TAG,
           summary="attach a policy to a group", status=201, errors=(400, 401, 403, 404, 409))
def attach_group_policy(ctx: Ctx) -> Response:
    """attachPolicyToGroup: attach a policy to a group (201) and drop cached auth; 404 for an unknown group or policy, 409 if attached."""
    _manage(ctx)
    _store(ctx).attach_group_policy(ctx.params["groupId"], ctx.params["policyId"])
    ctx.auth.forget()
    return empty(201)


@operation("DELETE", "/auth/groups/{groupId}/policies/{policyId}", "detachPolicyFromGroup", tag=TAG,
           summary="detach a policy from a group", status=204, errors=(400, 401, 403, 404))
def detach_group_policy(ctx: Ctx) -> Response:
    """detachPolicyFromGroup: detach a policy from a group (204) and drop cached auth; 404 if not attached."""
    _manage(ctx)
    _store(ctx).detach_group_policy(ctx.params["groupId"], ctx.params["policyId"])
    ctx.auth.forget()
    return empty(204)


@operation("GET", "/auth/users/{userId}/groups", "listUserGroups", tag=TAG, summary="the groups a user belongs to",
           params=PAGINATION, response="GroupList", errors=(400, 401, 403, 404))
def list_user_groups(ctx: Ctx) -> Response:
    """listUserGroups: a page of the user's groups by id (404 for an unknown user); another user than oneself needs ManageUsers."""
    if ctx.params["userId"] != ctx.user:
        _manage(ctx)
    return _page(ctx, _store(ctx).list_user_groups(ctx.params["userId"]), lambda g: g.id, group_json)
