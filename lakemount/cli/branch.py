"""``lakemount branch`` and ``lakemount branch-protect``."""

from __future__ import annotations

import click

from lakemount.catalog.shapes import ref_json
from lakemount.cli.common import ctx_obj, emit, emit_refs, json_option, parse_ref_uri, parse_repo_uri, ref_and_target


@click.group("branch")
def branch() -> None:
    """Create, list, show and delete branches."""


@branch.command("create")
@click.argument("uri")
@click.option("--source", "-s", required=True, help="Ref to branch from: lakefs://REPO/REF.")
@json_option
def create(uri: str, source: str) -> None:
    """Create branch URI (lakefs://REPO/BRANCH) at the commit SOURCE points to."""
    repo, name, ref = ref_and_target(uri, source, "source must be in the same repository")
    ctx_obj().acts_on(repo, "branch-created", name)
    b = ctx_obj().app.catalog.create_branch(repo, name, ref)
    emit(ref_json(b.name, b.commit_id), f"Created branch {name} at {b.commit_id[:12]}")


@branch.command("list")
@click.argument("uri")
@json_option
def list_(uri: str) -> None:
    """List branches of repository URI (lakefs://REPO)."""
    emit_refs(ctx_obj().app.catalog.list_branches(parse_repo_uri(uri).repo), id_chars=16)


@branch.command("show")
@click.argument("uri")
@json_option
def show(uri: str) -> None:
    """Show a branch's head commit and whether it has uncommitted changes."""
    repo, name = parse_ref_uri(uri)
    g = ctx_obj().app.catalog
    b = g.get_branch(repo, name)
    dirty = g.has_uncommitted(repo, b)
    emit({**ref_json(b.name, b.commit_id), "uncommitted_changes": dirty},
         f"Branch: {b.name}\nCommit ID: {b.commit_id}\nUncommitted changes: {'yes' if dirty else 'no'}")


@branch.command("delete")
@click.argument("uri")
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
@json_option
def delete(uri: str, yes: bool) -> None:
    """Delete a branch (not the default branch); its uncommitted changes are dropped, and counted."""
    repo, name = parse_ref_uri(uri)
    ctx_obj().acts_on(repo, "branch-deleted", name)
    cat = ctx_obj().app.catalog
    b = cat.get_branch(repo, name)  # a missing branch is an error before any question
    if not yes:
        pending = cat.count_uncommitted(repo, b)
        lost = f" Its {_changes(pending)} will be lost." if pending else ""
        click.confirm(f"Delete branch {name} of {repo}?{lost}", abort=True)
    dropped = cat.delete_branch(repo, name)
    emit({"deleted": name, "uncommitted_changes": dropped},
         f"Deleted branch {name}" + (f" and its {_changes(dropped)}" if dropped else " (no uncommitted changes)"))


def _changes(n: int) -> str:
    return f"{n} uncommitted change" + ("" if n == 1 else "s")


@click.group("branch-protect")
def protect() -> None:
    """Protect branches: a protected branch changes only by merge or revert.

    Direct writes (mount, S3 gateway, fs upload/rm), commits, resets,
    cherry-picks and deleting the branch are refused.
    """


@protect.command("add")
@click.argument("uri")
@click.argument("pattern")
@click.option("--required-approvals", type=click.IntRange(min=0), default=0, show_default=True,
              help="Approvals a pull request into these branches needs before it merges.")
@json_option
def protect_add(uri: str, pattern: str, required_approvals: int) -> None:
    """Protect branches of lakefs://REPO whose names match PATTERN (glob, e.g. 'release-*')."""
    u = parse_repo_uri(uri)
    cat = ctx_obj().app.catalog
    rules = cat.protection.add(u.repo, pattern)
    if required_approvals:
        cat.pulls.set_required(u.repo, pattern, required_approvals)
    emit({"patterns": rules}, f"Protected {pattern} in {u.repo}")


@protect.command("delete")
@click.argument("uri")
@click.argument("pattern")
@json_option
def protect_delete(uri: str, pattern: str) -> None:
    """Remove the protection rule PATTERN of lakefs://REPO."""
    u = parse_repo_uri(uri)
    cat = ctx_obj().app.catalog
    rules = cat.protection.delete(u.repo, pattern)
    cat.pulls.set_required(u.repo, pattern, 0)
    emit({"patterns": rules}, f"Removed protection {pattern} from {u.repo}")


@protect.command("list")
@click.argument("uri")
@json_option
def protect_list(uri: str) -> None:
    """List the protection rules of lakefs://REPO."""
    u = parse_repo_uri(uri)
    cat = ctx_obj().app.catalog
    rules = cat.protection.rules(u.repo)
    approvals = cat.pulls.store.required_approvals(u.repo)
    emit({"patterns": rules, "required_approvals": {p: approvals.get(p, 0) for p in rules}},
         [f"{p}  (pull requests need {approvals[p]} approval(s))" if approvals.get(p) else p for p in rules])


COMMANDS = [branch, protect]
