"""Repository rules: branch protection (lakeFS's ``settings/branch_protection`` and the older ``branch_protection``),
garbage collection rules (``settings/gc_rules``, the rules ``lakemount gc`` reads) and action runs.

Changing protection or GC rules needs ``DeleteRepo`` on the repository (see
``auth.SET_BRANCH_PROTECTION``, ``auth.SET_GC_RULES``: a refusal names the operation
and lakeFS's action for it); reading them and the runs of hooks needs ``ReadRepo``.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from lakemount.actions.runs import HookRun, Run
from lakemount.api.auth import SET_BRANCH_PROTECTION, SET_GC_RULES
from lakemount.api.context import INERT_HEADERS, Ctx, empty, json_response, repo_of
from lakemount.api.pagination import page
from lakemount.api.routing import AMOUNT, Param, operation
from lakemount.auth.policies import Action
from lakemount.errors import InvalidArgument, NotFound, PreconditionFailed
from lakemount.serving.http import Response

TAG = "repositories"
ACTIONS = "actions"


def _iso(ts: float) -> str:
    import datetime

    return datetime.datetime.fromtimestamp(ts, tz=datetime.UTC).isoformat().replace("+00:00", "Z")


def _rules_of(patterns: list[str], approvals: dict[str, int]) -> list[dict[str, Any]]:
    return [{"pattern": p, "required_approvals": approvals.get(p, 0)} for p in patterns]


def _rules(ctx: Ctx, repo: str) -> list[dict[str, Any]]:
    cat = ctx.catalog
    return _rules_of(cat.protection.rules(repo), cat.pulls.store.required_approvals(repo))


def _etag(rules: list[dict[str, Any]]) -> str:
    """The version of a rule set, as lakeFS's ETag: a digest of the rules, "" when there are none."""
    if not rules:
        return ""
    return hashlib.sha256(json.dumps(rules, sort_keys=True).encode()).hexdigest()


@operation("GET", "/repositories/{repository}/settings/branch_protection", "getBranchProtectionRules", tag=TAG,
           summary="branch protection rules (their version in the ETag header)", response="BranchProtectionRules")
def get_rules(ctx: Ctx) -> Response:
    """Branch protection rules, with their ETag for a conditional ``setBranchProtectionRules``."""
    repo = repo_of(ctx, Action.READ_REPO)
    rules = _rules(ctx, repo)
    return json_response(200, rules, (("ETag", _etag(rules)),))


@operation("PUT", "/repositories/{repository}/settings/branch_protection", "setBranchProtectionRules", tag=TAG,
           summary="replace the branch protection rules (only if If-Match is their ETag, when given)",
           body="BranchProtectionRules", status=204, params=(Param("If-Match", where="header"),),
           errors=(400, 401, 403, 404, 412))
def set_rules(ctx: Ctx) -> Response:
    """Replace the branch protection rules; 412 when If-Match is given and is not their current ETag
    ("" = there are none), so a read-modify-write (``lakectl branch-protect add``) does not drop a
    concurrent change.  Compare and write are one ref-store transaction: of two writers sending the
    same ETag, one wins and the other gets 412."""
    repo = repo_of(ctx, SET_BRANCH_PROTECTION)
    body: list[dict[str, Any]] = ctx.json_body()  # type: ignore[assignment]
    if_match = ctx.request.header("if-match")
    expected = None if if_match is None else if_match.strip().strip('"')

    def check(patterns: list[str], approvals: dict[str, int]) -> None:
        if expected is not None and expected != _etag(_rules_of(patterns, approvals)):
            raise PreconditionFailed(f"branch protection rules of {repo} changed since ETag {expected!r}")

    wanted = {r["pattern"]: max(0, int(r.get("required_approvals", 0))) for r in body}
    ctx.catalog.swap_protection_rules(repo, wanted, check)
    return empty(204)


@operation("GET", "/repositories/{repository}/branch_protection", "internalGetBranchProtectionRules", tag=TAG,
           summary="branch protection rules (older path)", response="BranchProtectionRules")
def get_rules_old(ctx: Ctx) -> Response:
    """Branch protection rules (older path): the same answer as ``getBranchProtectionRules``."""
    return get_rules(ctx)


@operation("POST", "/repositories/{repository}/branch_protection", "createBranchProtectionRulePreflight", tag=TAG,
           summary="add a branch protection rule", body="BranchProtectionRule", status=204, errors=(400, 401, 403, 404, 409))
def add_rule(ctx: Ctx) -> Response:
    """Add a branch protection rule."""
    repo = repo_of(ctx, SET_BRANCH_PROTECTION)
    body = ctx.json_body()
    ctx.catalog.protection.add(repo, body["pattern"])
    if body.get("required_approvals"):
        ctx.catalog.pulls.set_required(repo, body["pattern"], int(body["required_approvals"]))
    return empty(204)


@operation("DELETE", "/repositories/{repository}/branch_protection", "deleteBranchProtectionRule", tag=TAG,
           summary="remove a branch protection rule", body="BranchProtectionRule", status=204, errors=(400, 401, 403, 404))
def delete_rule(ctx: Ctx) -> Response:
    """Remove a branch protection rule."""
    repo = repo_of(ctx, SET_BRANCH_PROTECTION)
    pattern = ctx.json_body()["pattern"]
    ctx.catalog.protection.delete(repo, pattern)
    ctx.catalog.pulls.set_required(repo, pattern, 0)
    return empty(204)


# ---------------------------------------------------------------------------- action runs
def run_json(r: Run) -> dict[str, Any]:
    """A run in lakeFS's ActionRun shape."""
    return {
        "run_id": r.run_id, "branch": r.branch, "start_time": _iso(r.start_time), "end_time": _iso(r.end_time),
        "event_type": r.event_type, "status": r.status, "commit_id": r.commit_id, "source_ref": r.source_ref,
    }


def hook_json(h: HookRun) -> dict[str, Any]:
    """A hook run in lakeFS's HookRun shape."""
    return {
        "hook_run_id": h.hook_run_id, "action": h.action, "hook_id": h.hook_id, "start_time": _iso(h.start_time),
        "end_time": _iso(h.start_time + h.duration), "status": h.status,
    }


@operation("GET", "/repositories/{repository}/actions/runs", "listRepositoryRuns", tag=ACTIONS, summary="runs of hooks",
           params=(Param("after"), AMOUNT, Param("branch"), Param("commit")),
           response="ActionRunList")
def list_runs(ctx: Ctx) -> Response:
    """Runs of hooks."""
    repo = repo_of(ctx, Action.READ_REPO)
    ctx.catalog.repository(repo)
    n = ctx.page_size()
    runs = ctx.catalog.actions.store.list_runs(repo, branch=ctx.q("branch") or None, commit_id=ctx.q("commit") or None,
                                               after=ctx.q("after") or "", limit=n + 1)
    more = len(runs) > n
    runs = runs[:n]
    return json_response(200, page([run_json(r) for r in runs], more, runs[-1].run_id if runs else ""))


@operation("GET", "/repositories/{repository}/actions/runs/{run_id}", "getRun", tag=ACTIONS, summary="one run of hooks",
           response="ActionRun")
def get_run(ctx: Ctx) -> Response:
    """One run of hooks."""
    repo = repo_of(ctx, Action.READ_REPO)
    return json_response(200, run_json(ctx.catalog.actions.store.get_run(repo, ctx.params["run_id"])))


@operation("GET", "/repositories/{repository}/actions/runs/{run_id}/hooks", "listRunHooks", tag=ACTIONS,
           summary="the hooks of a run", params=(Param("after"), AMOUNT),
           response="HookRunList")
def list_run_hooks(ctx: Ctx) -> Response:
    """The hooks of a run."""
    repo = repo_of(ctx, Action.READ_REPO)
    hooks = list(ctx.catalog.actions.store.get_run(repo, ctx.params["run_id"]).hooks)
    after = ctx.q("after") or ""
    hooks = [h for h in hooks if h.hook_run_id > after]
    n = ctx.page_size()
    return json_response(200, page([hook_json(h) for h in hooks[:n]], len(hooks) > n, hooks[n - 1].hook_run_id if len(hooks) > n else ""))


@operation("GET", "/repositories/{repository}/actions/runs/{run_id}/hooks/{hook_run_id}/output", "getRunHookOutput",
           tag=ACTIONS, summary="what a hook printed or answered", content_type="application/octet-stream")
def hook_output(ctx: Ctx) -> Response:
    """What a hook printed or answered."""
    repo = repo_of(ctx, Action.READ_REPO)
    for h in ctx.catalog.actions.store.get_run(repo, ctx.params["run_id"]).hooks:
        if h.hook_run_id == ctx.params["hook_run_id"]:
            return Response(200, [("Content-Type", "application/octet-stream"), *INERT_HEADERS], h.output.encode())
    raise NotFound(f"hook run not found: {ctx.params['hook_run_id']}")


@operation("GET", "/repositories/{repository}/settings/gc_rules", "getGCRules", tag=TAG,
           summary="garbage collection rules", response="GarbageCollectionRules")
def get_gc_rules(ctx: Ctx) -> Response:
    """getGCRules: the repository's retention rules; 404 when none are set."""
    repo = repo_of(ctx, Action.READ_REPO)
    rules = ctx.catalog.gc_rules(repo)
    if rules is None:
        raise NotFound(f"no GC rules for repository {repo}")
    return json_response(200, rules.to_json())


@operation("PUT", "/repositories/{repository}/settings/gc_rules", "setGCRules", tag=TAG,
           summary="replace the garbage collection rules", body="GarbageCollectionRules", status=204,
           errors=(400, 401, 403, 404))
def set_gc_rules(ctx: Ctx) -> Response:
    """setGCRules: replace the retention rules (a rule may name a branch not created yet); 400 if they keep no history."""
    from lakemount.catalog.gcrules import GcRules

    repo = repo_of(ctx, SET_GC_RULES)
    rules = GcRules.from_json(ctx.json_body())
    if not rules.keeps_history:
        raise InvalidArgument("these rules keep no history (0 days everywhere); set them with `lakemount gc set-config --force`")
    ctx.catalog.set_gc_rules(repo, rules)
    return empty(204)


@operation("DELETE", "/repositories/{repository}/settings/gc_rules", "deleteGCRules", tag=TAG,
           summary="delete the garbage collection rules", status=204, errors=(401, 403, 404))
def delete_gc_rules(ctx: Ctx) -> Response:
    """deleteGCRules: drop the retention rules (GC then refuses to run until new ones are set)."""
    repo = repo_of(ctx, SET_GC_RULES)
    ctx.catalog.delete_gc_rules(repo)
    return empty(204)
