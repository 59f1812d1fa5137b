"""Imports: start, status and cancel of a zero-copy import (``lakemount.jobs.importer``) into a branch.

An import runs in its own process (``python -m lakemount.api.operations.imports``: it
starts Spark, which an API worker must not host) and records its state in
``LAKEMOUNT_HOME/imports/<id>.json``, which every API process reads, so
status and cancel work whichever worker the client reaches.  As in lakeFS
each prefix import replaces its destination prefix, an ``object`` source is
staged at its destination key, and the import ends with one commit; an import
takes several sources at once (``importer.import_locations``), each asked of
the catalog's rule before anything starts.  Cancel kills the import's process
group and its status says "Canceled" (lakeFS's word); what it had staged stays
staged (reset the branch to drop it), nothing is committed.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
import time
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from lakemount.api.context import Ctx, empty, json_response, repo_of
from lakemount.api.errors import ApiError, bad_request, not_found
from lakemount.api.routing import Param, operation
from lakemount.auth.policies import Action
from lakemount.config import config_pipe
from lakemount.serving.http import Response

if TYPE_CHECKING:
    from lakemount.app import App

TAG = "import"
ID = Param("id", required=True, description="the import's id")
MAX_LOCATIONS = 1000
CANCELED = "Canceled"  # lakeFS's catalog.ImportCanceled: scripts match on it


def _dir(home: str) -> str:
    d = os.path.join(home, "imports")
    os.makedirs(d, exist_ok=True)
    return d


def _write(path: str, record: dict[str, Any]) -> None:
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w") as f:
        json.dump(record, f)
    os.replace(tmp, path)


def _read(ctx: Ctx, import_id: str) -> tuple[str, dict[str, Any]]:
    if not import_id.isalnum() or len(import_id) > 64:
        raise bad_request("malformed import id")
    path = os.path.join(_dir(ctx.service.app.config.home), f"{import_id}.json")
    try:
        with open(path) as f:
            record = json.load(f)
    except FileNotFoundError:
        raise not_found(f"import not found: {import_id}") from None
    if record["repo"] != ctx.params["repository"] or record["branch"] != ctx.params["branch"]:
        raise not_found(f"import not found: {import_id}")
    return path, record


def _iso(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).isoformat().replace("+00:00", "Z")


@operation("POST", "/repositories/{repository}/branches/{branch}/import", "importStart", tag=TAG,
           summary="import objects from s3:// or local:// without copying them, then commit", body="ImportCreation",
           response="ImportCreationResponse", status=202, errors=(400, 401, 403, 404))
def import_start(ctx: Ctx) -> Response:
    """importStart: start importing ``paths`` (``common_prefix`` and ``object`` locations, s3:// or local://) in a
    background process, answering its id (202); 403 without both WriteRepo and ImportFromStorage, 400 for other
    locations and for a local one outside ``blockstore.local.import_roots`` (overlapping destinations fail the import)."""
    repo = repo_of(ctx, Action.WRITE_REPO)
    # Reading the server's storage is a right of its own (lakeFS's fs:ImportFromStorage): write rights
    # alone would let any writer read what the server can.  Asked before the body says anything.
    ctx.require(Action.IMPORT_FROM_STORAGE, repo)
    branch = ctx.params["branch"]
    body = ctx.json_body()
    paths = body["paths"]
    if len(paths) > MAX_LOCATIONS:
        raise bad_request(f"an import takes at most {MAX_LOCATIONS} paths, not {len(paths)}")
    locations: list[dict[str, str]] = []
    for loc in paths:
        if loc["type"] not in ("common_prefix", "object"):
            raise bad_request(f"unknown import location type {loc['type']!r} (common_prefix or object)")
        if not loc["path"].startswith(("s3://", "local://")):
            raise bad_request("import path must be s3://bucket/prefix or local:///absolute/path")
        locations.append({"type": loc["type"], "path": loc["path"], "destination": loc["destination"]})
    ctx.catalog.writable_branch(repo, branch)
    for loc in locations:  # each refused here (400), not as a failed import later; the job asks again
        ctx.catalog.import_source(loc["path"], single=loc["type"] == "object")
    commit = body["commit"]
    import_id = secrets.token_hex(10)
    home = ctx.service.app.config.home
    d = _dir(home)
    path = os.path.join(d, f"{import_id}.json")
    now = time.time()
    record: dict[str, Any] = {"id": import_id, "repo": repo, "branch": branch, "state": "running", "pid": None,
                              "update_time": now, "locations": locations,
                              "message": commit["message"], "metadata": commit.get("metadata") or {},
                              "committer": ctx.user}
    if not locations:
        # lakeFS's import of no paths: one empty commit with the message and metadata, done at once (no Spark).
        _write(path, _finish(ctx.service.app, record))
        return json_response(202, {"id": import_id})
    _write(path, record)
    # The configuration (secrets included) reaches the runner through a pipe, never a file.
    cfg = config_pipe(ctx.service.app.config)
    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", "lakemount.api.operations.imports", path, f"/dev/fd/{cfg}"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True, env={**os.environ, "LAKEMOUNT_HOME": home}, pass_fds=(cfg,),
        )
    finally:
        os.close(cfg)
    # The runner rewrites the record when done; the pid goes in only while it runs.
    with open(path) as f:
        current = json.load(f)
    if current.get("state") == "running":
        current["pid"] = proc.pid
        _write(path, current)
    return json_response(202, {"id": import_id})


@operation("GET", "/repositories/{repository}/branches/{branch}/import", "importStatus", tag=TAG,
           summary="an import's state", params=(ID,), response="ImportStatus")
def import_status(ctx: Ctx) -> Response:
    """importStatus: state of import ``id`` (completion, ingested count, its commit or error); 404 for an unknown id."""
    repo_of(ctx, Action.READ_REPO)
    _, r = _read(ctx, ctx.q_required("id"))
    out: dict[str, Any] = {"completed": r["state"] == "done", "update_time": _iso(r["update_time"]),
                           "ingested_objects": r.get("ingested_objects", 0)}
    if r.get("commit"):
        out["commit"] = r["commit"]
        out["metarange_id"] = r["commit"]["meta_range_id"]
    if r["state"] in ("failed", "canceled"):
        out["error"] = {"message": r.get("error") or r["state"]}
    return json_response(200, out)


@operation("DELETE", "/repositories/{repository}/branches/{branch}/import", "importCancel", tag=TAG,
           summary="cancel a running import", params=(ID,), status=204, errors=(400, 401, 403, 404, 409))
def import_cancel(ctx: Ctx) -> Response:
    """importCancel: kill running import ``id`` and record it canceled (204); 409 if it is not running, 404 for an unknown id."""
    repo_of(ctx, Action.WRITE_REPO)
    path, r = _read(ctx, ctx.q_required("id"))
    if r["state"] != "running":
        raise ApiError(409, f"import {r['id']} is not running ({r['state']})")
    pid = r.get("pid")
    if pid:
        try:
            os.killpg(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    r.update(state="canceled", update_time=time.time(), error=CANCELED)
    _write(path, r)
    return empty(204)


def _finish(app: App, record: dict[str, Any], record_path: str | None = None) -> dict[str, Any]:
    """Run the import ``record`` describes with ``app`` and return the record of its outcome (never raises).

    With ``record_path``, an import canceled meanwhile (its record says so) keeps that record."""
    from lakemount.api.models import commit_json
    from lakemount.jobs.importer import Location, import_locations

    try:
        report = import_locations(
            app, [Location(**loc) for loc in record["locations"]], record["repo"], record["branch"], commit=True,
            message=record["message"], committer=record.get("committer") or "lakemount",
            metadata=sorted(record["metadata"].items()), show_progress=False,
        )
        if record_path is not None:
            with open(record_path) as f:
                current = json.load(f)
            if current.get("state") == "canceled":
                return current
        record.update(state="done", ingested_objects=report["objects"])
        if report["commit"]:
            record["commit"] = commit_json(app.catalog.get_commit(record["repo"], report["commit"]["id"]))
    except Exception as e:  # noqa: BLE001 - every failure is the import's outcome
        record.update(state="failed", error=str(e) or type(e).__name__)
    record["update_time"] = time.time()
    return record


def _run(record_path: str, config_path: str) -> None:
    """The import process: run the import, then record its outcome (never raises)."""
    from lakemount.app import App
    from lakemount.config import load

    with open(record_path) as f:
        record = json.load(f)
    try:
        app = App(load(config_path))
    except Exception as e:  # noqa: BLE001 - every failure is the import's outcome
        record.update(state="failed", error=str(e) or type(e).__name__, update_time=time.time())
        _write(record_path, record)
        return
    outcome = _finish(app, record, record_path)
    if outcome.get("state") != "canceled":
        _write(record_path, outcome)


if __name__ == "__main__":
    _run(sys.argv[1], sys.argv[2])
