"""``lakemount auth``: users, groups, access keys and policies, mirroring ``lakectl auth``.

    lakemount auth users create --id alice
    lakemount auth users credentials create --id alice --json
    lakemount auth users policies attach --id alice --policy Developer
    lakemount auth groups create --id Developers
    lakemount auth groups attach --id Developers --policy Developer
    lakemount auth groups add-user --id Developers --user alice

The singulars ``auth group``, ``auth user`` and ``auth policy`` are accepted too.

Secrets are printed once, when created; they are stored encrypted under the
server key and never shown again.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import IO, ClassVar, Final

import click

from lakemount.auth.policies import Policy
from lakemount.auth.store import SqlAuthStore
from lakemount.catalog import shapes
from lakemount.cli.common import ctx_obj, emit, json_option

POLICY_HELP: Final = "Policy name (Admin, Developer, Analyst, or a custom one)."


def _store() -> SqlAuthStore:
    return ctx_obj().app.auth


def _relation(group: click.Group, name: str, doc: str, *, subject: str, other: str, joined: bool,
              change: Callable[[SqlAuthStore, str, str], None]) -> None:
    """Add to ``group`` the verb ``name`` that links (``joined``) or unlinks a user or group (``--id``) and a
    policy or user (``--policy``, ``--user``) through ``change(store, id, other)``, and says so:
    ``Policy attached: Developer -> alice``, ``User removed: alice -x- Developers``."""
    past = {"attach": "attached", "detach": "detached", "add-user": "added", "remove-user": "removed"}[name]
    other_help = "User id." if other == "user" else (POLICY_HELP if joined else "Policy name.")

    @group.command(name, help=doc)
    @click.option("--id", "subject_id", required=True, help=f"{subject.capitalize()} id.")
    @click.option(f"--{other}", "other_id", required=True, help=other_help)
    @json_option
    def verb(subject_id: str, other_id: str) -> None:
        change(_store(), subject_id, other_id)
        emit({subject: subject_id, past: other_id},
             f"{other.capitalize()} {past}: {other_id} {'->' if joined else '-x-'} {subject_id}")


class _Aliased(click.Group):
    """A click group that also answers to the singular of a subgroup's name."""

    aliases: ClassVar[dict[str, str]] = {"group": "groups", "user": "users", "policy": "policies"}

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        return super().get_command(ctx, self.aliases.get(cmd_name, cmd_name))

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        name, cmd, rest = super().resolve_command(ctx, args)
        return (cmd.name if cmd is not None else name), cmd, rest


@click.group("auth", cls=_Aliased)
def auth() -> None:
    """Manage users, groups, their access keys and their policies.

    A user may do what the policies attached to them, and to every group they
    belong to, allow; any matching Deny wins.
    """


# --- users -------------------------------------------------------------------------


@auth.group("users")
def users() -> None:
    """Create, list and delete users."""


@users.command("create")
@click.option("--id", "user_id", required=True, help="User id.")
@json_option
def users_create(user_id: str) -> None:
    """Create a user."""
    u = _store().create_user(user_id)
    emit(shapes.user_json(u), f"User: {u.id}")


@users.command("list")
@click.option("--amount", type=int, default=None, help="How many to list.")
@click.option("--after", default="", help="List users after this id.")
@json_option
def users_list(amount: int | None, after: str) -> None:
    """List users."""
    found = _store().list_users(after=after, limit=amount)
    emit(
        [shapes.user_json(u) for u in found],
        [f"{u.id}\t{u.created_at.isoformat(timespec='seconds')}" for u in found],
    )


@users.command("delete")
@click.option("--id", "user_id", required=True, help="User id.")
@json_option
def users_delete(user_id: str) -> None:
    """Delete a user with its access keys and policy attachments."""
    _store().delete_user(user_id)
    emit({"deleted": user_id}, f"User deleted: {user_id}")


# --- credentials -------------------------------------------------------------------------


@users.group("credentials")
def credentials() -> None:
    """Create, list and delete a user's access keys."""


@credentials.command("create")
@click.option("--id", "user_id", required=True, help="User id.")
@click.option("--access-key-id", default=None, help="Use this key id instead of a generated one.")
@click.option("--secret-access-key", default=None, help="Use this secret instead of a generated one.")
@json_option
def credentials_create(user_id: str, access_key_id: str | None, secret_access_key: str | None) -> None:
    """Create an access key; its secret is shown this once."""
    c = _store().create_credentials(user_id, access_key_id, secret_access_key)
    emit(
        shapes.credentials_json(c, with_secret=True),
        [f"Access key ID: {c.access_key_id}", f"Secret access key: {c.secret_access_key}"],
    )


@credentials.command("list")
@click.option("--id", "user_id", required=True, help="User id.")
@json_option
def credentials_list(user_id: str) -> None:
    """List a user's access key ids (never their secrets)."""
    keys = _store().list_credentials(user_id)
    emit(
        [shapes.credentials_json(k) for k in keys],
        [f"{k.access_key_id}\t{k.created_at.isoformat(timespec='seconds')}" for k in keys],
    )


@credentials.command("delete")
@click.option("--id", "user_id", required=True, help="User id.")
@click.option("--access-key-id", required=True, help="The key to delete.")
@json_option
def credentials_delete(user_id: str, access_key_id: str) -> None:
    """Delete one access key of a user."""
    _store().delete_credentials(user_id, access_key_id)
    emit({"deleted": access_key_id}, f"Credentials deleted: {access_key_id}")


# --- user policies -------------------------------------------------------------------------


@users.group("policies")
def user_policies() -> None:
    """Attach, detach and list a user's policies."""


_relation(user_policies, "attach", "Attach a policy to a user.", subject="user", other="policy", joined=True,
          change=SqlAuthStore.attach_policy)
_relation(user_policies, "detach", "Detach a policy from a user.", subject="user", other="policy", joined=False,
          change=SqlAuthStore.detach_policy)


@user_policies.command("list")
@click.option("--id", "user_id", required=True, help="User id.")
@click.option("--effective", is_flag=True, help="Also the policies the user has through their groups.")
@json_option
def policies_list(user_id: str, effective: bool) -> None:
    """List the policies attached to a user (with --effective, also through groups)."""
    store = _store()
    names = store.effective_policy_names(user_id) if effective else store.list_user_policies(user_id)
    emit([{"id": n} for n in names], names)


@users.command("groups")
@click.option("--id", "user_id", required=True, help="User id.")
@json_option
def users_groups(user_id: str) -> None:
    """List the groups a user belongs to."""
    found = _store().list_user_groups(user_id)
    emit([shapes.group_json(g) for g in found], [g.id for g in found])


# --- groups -------------------------------------------------------------------------


@auth.group("groups")
def groups() -> None:
    """Create and delete groups, manage their members and policies.

    Every member of a group has the policies attached to the group, besides
    their own.  Changes take effect in running servers within 5 seconds.
    """


@groups.command("create")
@click.option("--id", "group_id", required=True, help="Group id (1-128 of A-Z a-z 0-9 _+=,.@-).")
@click.option("--description", default="", help="What the group is for.")
@json_option
def groups_create(group_id: str, description: str) -> None:
    """Create a group (with no members and no policies)."""
    g = _store().create_group(group_id, description)
    emit(shapes.group_json(g), f"Group: {g.id}")


@groups.command("delete")
@click.option("--id", "group_id", required=True, help="Group id.")
@json_option
def groups_delete(group_id: str) -> None:
    """Delete a group; its members lose the policies they had only through it."""
    _store().delete_group(group_id)
    emit({"deleted": group_id}, f"Group deleted: {group_id}")


@groups.command("list")
@click.option("--amount", type=int, default=None, help="How many to list.")
@click.option("--after", default="", help="List groups after this id.")
@json_option
def groups_list(amount: int | None, after: str) -> None:
    """List groups."""
    found = _store().list_groups(after=after, limit=amount)
    emit(
        [shapes.group_json(g) for g in found],
        [f"{g.id}\t{g.created_at.isoformat(timespec='seconds')}\t{g.description}".rstrip("\t") for g in found],
    )


@groups.command("show")
@click.option("--id", "group_id", required=True, help="Group id.")
@json_option
def groups_show(group_id: str) -> None:
    """Show a group with its members and the policies attached to it."""
    store = _store()
    g = store.get_group(group_id)
    members = [u.id for u in store.list_members(group_id)]
    attached = store.list_group_policies(group_id)
    emit(
        {**shapes.group_json(g), "members": members, "policies": attached},
        [
            f"Group: {g.id}",
            *([f"Description: {g.description}"] if g.description else []),
            f"Created: {g.created_at.isoformat(timespec='seconds')}",
            f"Members: {', '.join(members) or '-'}",
            f"Policies: {', '.join(attached) or '-'}",
        ],
    )


_relation(groups, "add-user", "Make a user a member of a group.", subject="group", other="user", joined=True,
          change=SqlAuthStore.add_member)
_relation(groups, "remove-user", "Remove a user from a group.", subject="group", other="user", joined=False,
          change=SqlAuthStore.remove_member)
_relation(groups, "attach", "Attach a policy to a group: every member gets it.", subject="group", other="policy", joined=True,
          change=SqlAuthStore.attach_group_policy)
_relation(groups, "detach", "Detach a policy from a group.", subject="group", other="policy", joined=False,
          change=SqlAuthStore.detach_group_policy)


# --- policies -------------------------------------------------------------------------


@auth.group("policies")
def policies() -> None:
    """Create, show, list and delete policies."""


def _policy_json(p: Policy) -> dict[str, object]:
    return {"id": p.name, "statement": json.loads(p.to_json())}


@policies.command("create")
@click.option("--id", "name", required=True, help="Policy name.")
@click.option(
    "--statement-document",
    required=True,
    type=click.File("r"),
    help='JSON file ("-" for stdin): [{"effect": "Allow", "actions": ["ReadRepo"], "resource": "repo-*"}] '
    'or lakeFS\'s {"statement": [...]} with "action".',
)
@json_option
def policies_create(name: str, statement_document: IO[str]) -> None:
    """Create a custom policy."""
    raw = json.load(statement_document)
    statements = raw.get("statement", raw.get("Statement")) if isinstance(raw, dict) else raw
    if not isinstance(statements, list):
        raise click.BadParameter("the document must be a list of statements or {\"statement\": [...]}")
    normalised = [
        {
            "effect": s.get("effect", s.get("Effect", "Allow")),
            "actions": s.get("actions", s.get("action", s.get("Action", []))),
            "resource": s.get("resource", s.get("Resource", "*")),
        }
        for s in statements
    ]
    for s in normalised:
        if isinstance(s["actions"], str):
            s["actions"] = [s["actions"]]
    policy = Policy.from_json(name, json.dumps(normalised))
    _store().create_policy(policy)
    emit(_policy_json(policy), f"Policy created: {name}")


@policies.command("list")
@json_option
def policies_list_all() -> None:
    """List built-in and custom policies."""
    found = _store().list_policies()
    emit([_policy_json(p) for p in found], [p.name for p in found])


@policies.command("show")
@click.option("--id", "name", required=True, help="Policy name.")
@json_option
def policies_show(name: str) -> None:
    """Show a policy's statements."""
    p = _store().get_policy(name)
    emit(_policy_json(p), json.dumps(_policy_json(p), indent=2))


@policies.command("delete")
@click.option("--id", "name", required=True, help="Policy name.")
@json_option
def policies_delete(name: str) -> None:
    """Delete a custom policy (detaching it from every user and group)."""
    _store().delete_policy(name)
    emit({"deleted": name}, f"Policy deleted: {name}")


COMMANDS = [auth]
