"""``lakemount pr``: pull requests -- open, list, show (with the diff), comment, approve, merge, close, reopen."""

from __future__ import annotations

import getpass
from collections.abc import Iterator
from typing import Any

import click

from lakemount.catalog.pulls import Comment, PullRequest, Pulls
from lakemount.cli.common import ctx_obj, emit, iso, json_option, parse_repo_uri
from lakemount.errors import MergeConflict

DIFF_SHOWN = 1000


def pr_json(p: PullRequest) -> dict[str, Any]:
    """A pull request in lakeFS's ``PullRequest`` shape."""
    return {
        "id": p.id,
        "status": p.status,
        "title": p.title,
        "description": p.description,
        "source_branch": p.source_branch,
        "destination_branch": p.destination_branch,
        "author": p.author,
        "creation_date": iso(p.creation_date),
        "closed_date": iso(p.closed_date) if p.closed_date else None,
        "merged_commit_id": p.merged_commit_id,
    }


def _all_comments(pulls: Pulls, repo: str, pull_id: str) -> Iterator[Comment]:
    """Every comment of a pull request, read a page at a time."""
    after = 0
    while page := pulls.comments(repo, pull_id, after):
        yield from page
        after = page[-1].id


def _user(author: str | None) -> str:
    return author or getpass.getuser()


@click.group("pr")
def pr() -> None:
    """Pull requests: propose merging a branch, discuss, approve, merge."""


@pr.command("create")
@click.argument("uri")
@click.option("--source", "-s", required=True, help="Branch with the changes.")
@click.option("--destination", "--dest", "-d", required=True, help="Branch to merge into.")
@click.option("--title", "-t", required=True, help="One line saying what the change is.")
@click.option("--description", default="", help="Longer text.")
@click.option("--author", default=None, help="Author (default: $USER).")
@json_option
def create(uri: str, source: str, destination: str, title: str, description: str, author: str | None) -> None:
    """Open a pull request in lakefs://REPO from SOURCE into DESTINATION."""
    u = parse_repo_uri(uri)
    p = ctx_obj().app.catalog.pulls.create(u.repo, source, destination, title, description, author=_user(author))
    emit(pr_json(p), f"Opened pull request #{p.id}: {p.source_branch} -> {p.destination_branch}")


@pr.command("list")
@click.argument("uri")
@click.option("--status", default="open", type=click.Choice(["open", "closed", "merged", "all"]), show_default=True,
              help="Only pull requests in this state.")
@click.option("--amount", default=100, show_default=True, help="Show at most this many.")
@click.option("--after", default="", help="Only ids after this one (paging).")
@json_option
def list_(uri: str, status: str, amount: int, after: str) -> None:
    """List pull requests of lakefs://REPO."""
    u = parse_repo_uri(uri)
    found = ctx_obj().app.catalog.pulls.list_pulls(u.repo, None if status == "all" else status, after, amount)
    emit([pr_json(p) for p in found],
         [f"#{p.id:<5} {p.status:<7} {p.source_branch} -> {p.destination_branch}  {p.title}  ({p.author})" for p in found])


@pr.command("show")
@click.argument("uri")
@click.argument("pull_id")
@json_option
def show(uri: str, pull_id: str) -> None:
    """Show a pull request: its fields, approvals, comments and what the merge would change."""
    u = parse_repo_uri(uri)
    cat = ctx_obj().app.catalog
    pulls = cat.pulls
    p = pulls.get(u.repo, pull_id)
    approvals = pulls.approvals(u.repo, pull_id)
    comments = list(_all_comments(pulls, u.repo, pull_id))
    required = pulls.required(u.repo, p.destination_branch)
    diff: list[dict[str, Any]] = []
    truncated = False
    if p.status == "open":
        for rec in cat.diff_three_way(u.repo, p.destination_branch, p.source_branch):
            if len(diff) >= DIFF_SHOWN:
                truncated = True
                break
            diff.append({"path": rec.key.decode("utf-8", "surrogateescape"), "type": rec.kind})
    data = {
        **pr_json(p),
        "required_approvals": required,
        "approvals": [{"user": a.user, "creation_date": iso(a.creation_date)} for a in approvals],
        "comments": [{"id": c.id, "author": c.author, "body": c.body, "creation_date": iso(c.creation_date)} for c in comments],
        "diff": diff,
        "diff_truncated": truncated,
    }
    lines = [
        f"Pull request #{p.id}: {p.title}",
        f"Status: {p.status}" + (f" (merged as {p.merged_commit_id})" if p.merged_commit_id else ""),
        f"{p.source_branch} -> {p.destination_branch}, by {p.author} on {iso(p.creation_date)}",
        f"Approvals: {len(approvals)} of {required} required" + (f" ({', '.join(a.user for a in approvals)})" if approvals else ""),
    ]
    if p.description:
        lines += ["", p.description]
    if diff:
        lines += ["", "Changes:"] + [f"  {d['type']:<9} {d['path']}" for d in diff] + (["  ..."] if truncated else [])
    for c in comments:
        lines += ["", f"{c.author} on {iso(c.creation_date)}:", *(f"  {line}" for line in c.body.splitlines())]
    emit(data, lines)


@pr.command("comment")
@click.argument("uri")
@click.argument("pull_id")
@click.option("--message", "-m", required=True, help="The comment's text.")
@click.option("--author", default=None, help="Author (default: $USER).")
@json_option
def comment(uri: str, pull_id: str, message: str, author: str | None) -> None:
    """Comment on a pull request."""
    u = parse_repo_uri(uri)
    c = ctx_obj().app.catalog.pulls.comment(u.repo, pull_id, message, author=_user(author))
    emit({"id": c.id, "author": c.author, "body": c.body, "creation_date": iso(c.creation_date)}, f"Commented on #{pull_id}")


@pr.command("approve")
@click.argument("uri")
@click.argument("pull_id")
@click.option("--user", default=None, help="Approver (default: $USER).")
@json_option
def approve(uri: str, pull_id: str, user: str | None) -> None:
    """Approve a pull request (not your own)."""
    u = parse_repo_uri(uri)
    approvals = ctx_obj().app.catalog.pulls.approve(u.repo, pull_id, user=_user(user))
    emit({"approvals": [a.user for a in approvals]}, f"Approved #{pull_id} ({len(approvals)} approval(s))")


@pr.command("merge")
@click.argument("uri")
@click.argument("pull_id")
@click.option("--strategy", type=click.Choice(["source-wins", "dest-wins"]), default=None,
              help="How to resolve paths changed on both sides (default: fail on conflicts).")
@click.option("--squash", is_flag=True, help="Record one parent only (the destination).")
@json_option
def merge(uri: str, pull_id: str, strategy: str | None, squash: bool) -> None:
    """Merge an approved pull request into its destination."""
    u = parse_repo_uri(uri)
    try:
        p, res = ctx_obj().app.catalog.pulls.merge(u.repo, pull_id, strategy=strategy, squash=squash, committer=getpass.getuser())
    except MergeConflict as exc:
        if ctx_obj().as_json:
            emit({"error": "conflict", "conflicts": exc.paths})
        raise
    emit({**pr_json(p), "changes": res.changes}, f"Merged #{p.id} into {p.destination_branch}: {res.commit_id}")


@pr.command("close")
@click.argument("uri")
@click.argument("pull_id")
@json_option
def close(uri: str, pull_id: str) -> None:
    """Close a pull request without merging."""
    u = parse_repo_uri(uri)
    p = ctx_obj().app.catalog.pulls.close(u.repo, pull_id)
    emit(pr_json(p), f"Closed #{p.id}")


@pr.command("reopen")
@click.argument("uri")
@click.argument("pull_id")
@json_option
def reopen(uri: str, pull_id: str) -> None:
    """Reopen a closed pull request."""
    u = parse_repo_uri(uri)
    p = ctx_obj().app.catalog.pulls.reopen(u.repo, pull_id)
    emit(pr_json(p), f"Reopened #{p.id}")


COMMANDS = [pr]
