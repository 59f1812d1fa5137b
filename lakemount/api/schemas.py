"""The JSON shapes of requests and responses, in lakeFS's names, and the validator of request bodies.

Each schema is an OpenAPI 3.0 schema object (a subset of JSON Schema); the
same dictionaries validate incoming bodies (:func:`validate`: wrong types,
missing required fields and unknown fields are a 400) and describe the API
in the served document (``openapi.py``).  Only the subset used here is
understood by the validator: ``object`` with ``properties``, ``required``
and ``additionalProperties``; ``array`` with ``items``; ``string``,
``integer``, ``boolean``; ``enum``; ``nullable``; ``$ref`` to this module's
components.
"""

from __future__ import annotations

from typing import Any, Final

from lakemount.api.errors import ApiError

S = dict[str, Any]

STR: Final[S] = {"type": "string"}
INT: Final[S] = {"type": "integer", "format": "int64"}
BOOL: Final[S] = {"type": "boolean"}
STR_MAP: Final[S] = {"type": "object", "additionalProperties": {"type": "string"}}


def ref(name: str) -> S:
    """A ``$ref`` to component schema ``name``."""
    return {"$ref": f"#/components/schemas/{name}"}


def obj(required: list[str], closed: bool = True, **props: S) -> S:
    """An object schema with ``props``, ``required`` names, closed to other properties unless ``closed`` is false."""
    out: S = {"type": "object", "properties": props}
    if required:
        out["required"] = required
    if closed:
        out["additionalProperties"] = False
    return out


def listing(item: str) -> S:
    """The schema of a paginated list of ``item``s (``pagination`` and ``results``)."""
    return obj(["pagination", "results"], closed=False, pagination=ref("Pagination"), results={"type": "array", "items": ref(item)})


def nullable(s: S) -> S:
    """``s`` with ``nullable: true``."""
    return {**s, "nullable": True}


COMPONENTS: Final[dict[str, S]] = {
    "Error": obj(["message"], closed=False, message=STR),
    "Pagination": obj(
        ["has_more", "next_offset", "results", "max_per_page"], closed=False,
        has_more=BOOL, next_offset=STR, results={"type": "integer", "minimum": 0}, max_per_page={"type": "integer", "minimum": 0},
    ),
    "VersionConfig": obj([], closed=False, version=STR, upgrade_recommended=BOOL),
    "StorageConfig": obj(
        ["blockstore_type", "blockstore_namespace_example", "blockstore_namespace_ValidityRegex", "pre_sign_support",
         "pre_sign_support_ui", "import_support", "import_validity_regex"], closed=False,
        blockstore_type=STR, blockstore_namespace_example=STR, blockstore_namespace_ValidityRegex=STR,
        default_namespace_prefix=STR, pre_sign_support=BOOL, pre_sign_support_ui=BOOL, import_support=BOOL,
        import_validity_regex=STR, pre_sign_multipart_upload=BOOL, blockstore_id=STR, blockstore_description=STR,
    ),
    "Config": obj([], closed=False, version_config=ref("VersionConfig"), storage_config=ref("StorageConfig"),
                  storage_config_list={"type": "array", "items": ref("StorageConfig")}),
    "LoginInformation": obj(["access_key_id", "secret_access_key"], access_key_id=STR, secret_access_key=STR),
    "AuthenticationToken": obj(["token"], closed=False, token=STR, token_expiration=INT),
    "RepositoryCreation": obj(
        ["name", "storage_namespace"], name=STR, storage_namespace=STR, default_branch=STR, sample_data=BOOL,
        read_only=BOOL, storage_id=STR,
    ),
    "Repository": obj(
        ["id", "creation_date", "default_branch", "storage_namespace"], closed=False,
        id=STR, creation_date=INT, default_branch=STR, storage_namespace=STR, read_only=BOOL, storage_id=STR,
    ),
    "RepositoryList": listing("Repository"),
    "RepositoryMetadata": STR_MAP,
    "RepositoryPermissions": obj(["user", "repository", "actions"], user=STR, repository=STR,
                                 actions={"type": "object", "additionalProperties": BOOL}),
    "Ref": obj(["id", "commit_id"], closed=False, id=STR, commit_id=STR),
    "RefList": listing("Ref"),
    "BranchCreation": obj(["name", "source"], name=STR, source=STR, force=BOOL, hidden=BOOL),
    "TagCreation": obj(["id", "ref"], id=STR, ref=STR, force=BOOL),
    "ResetCreation": obj(["type"], type={"type": "string", "enum": ["object", "common_prefix", "reset"]}, path=STR, force=BOOL),
    "RevertCreation": obj(
        ["ref", "parent_number"], ref=STR, parent_number={"type": "integer", "minimum": 0}, force=BOOL, allow_empty=BOOL,
        commit_overrides=obj([], message=STR, metadata=STR_MAP),
    ),
    "CherryPickCreation": obj(
        ["ref"], ref=STR, parent_number={"type": "integer", "minimum": 0}, force=BOOL,
        commit_overrides=obj([], message=STR, metadata=STR_MAP),
    ),
    "CommitCreation": obj(["message"], message=STR, metadata=STR_MAP, date=INT, allow_empty=BOOL, force=BOOL),
    "Commit": obj(
        ["id", "parents", "committer", "message", "creation_date", "meta_range_id"], closed=False,
        id=STR, parents={"type": "array", "items": STR}, committer=STR, message=STR, creation_date=INT,
        meta_range_id=STR, metadata=STR_MAP, generation=INT, version=INT,
    ),
    "CommitList": listing("Commit"),
    "Merge": obj(
        [], message=STR, metadata=STR_MAP, strategy={"type": "string", "enum": ["dest-wins", "source-wins"]},
        force=BOOL, allow_empty=BOOL, squash_merge=BOOL,
    ),
    "MergeResult": obj(["reference"], closed=False, reference=STR),
    "FindMergeBaseResult": obj(
        ["source_commit_id", "destination_commit_id", "base_commit_id"], closed=False,
        source_commit_id=STR, destination_commit_id=STR, base_commit_id=STR,
    ),
    "Diff": obj(
        ["type", "path", "path_type"], closed=False,
        type={"type": "string", "enum": ["added", "removed", "changed", "conflict", "prefix_changed"]},
        path=STR, path_type={"type": "string", "enum": ["common_prefix", "object"]}, size_bytes=INT,
    ),
    "DiffList": listing("Diff"),
    "ObjectStats": obj(
        ["path", "path_type", "physical_address", "checksum", "mtime"], closed=False,
        path=STR, path_type={"type": "string", "enum": ["common_prefix", "object"]}, physical_address=STR,
        physical_address_expiry=INT, checksum=STR, size_bytes=INT, mtime=INT, metadata=STR_MAP, content_type=STR,
    ),
    "StagingLocation": obj([], closed=False, physical_address=STR, presigned_url=nullable(STR), presigned_url_expiry=INT),
    "StagingMetadata": obj(
        ["staging", "checksum", "size_bytes"], staging=ref("StagingLocation"), checksum=STR,
        size_bytes={"type": "integer", "format": "int64", "minimum": 0}, user_metadata=STR_MAP, content_type=STR,
        mtime=nullable(INT), force=BOOL,
    ),
    "ObjectStatsList": listing("ObjectStats"),
    "AuditRecord": obj(
        ["id", "time", "seq", "user", "frontend", "repo", "ref", "commit", "path", "op", "bytes", "status"], closed=False,
        id=STR, time=STR, timestamp={"type": "number"}, seq=INT, user=STR, frontend=STR, client=STR, repo=STR, ref=STR,
        commit=STR, path=STR, op=STR, bytes=INT, status=INT, uid=INT, process=STR, pid=INT, host=STR, detail=STR,
    ),
    "AuditRecordList": listing("AuditRecord"),
    "AuditOperation": obj(["name", "frontend", "kind", "summary"], closed=False, name=STR, frontend=STR,
                          kind={"type": "string", "enum": ["read", "write", "other"]}, summary=STR),
    "AuditOperationList": listing("AuditOperation"),
    "ObjectCopyCreation": obj(["src_path"], src_path=STR, src_ref=STR, force=BOOL, shallow=BOOL),
    "PathList": obj(["paths"], paths={"type": "array", "items": STR}),
    "ObjectError": obj(["status_code", "message"], closed=False, status_code=INT, message=STR, path=STR),
    "ObjectErrorList": obj(["errors"], closed=False, errors={"type": "array", "items": ref("ObjectError")}),
    "ImportLocation": obj(
        ["type", "path", "destination"], type={"type": "string", "enum": ["common_prefix", "object"]}, path=STR, destination=STR,
    ),
    "CommitCreationForImport": obj(["message"], message=STR, metadata=STR_MAP, date=INT, allow_empty=BOOL, force=BOOL),
    "ImportCreation": obj(
        ["paths", "commit"], paths={"type": "array", "items": ref("ImportLocation")}, commit=ref("CommitCreationForImport"), force=BOOL,
    ),
    "ImportCreationResponse": obj(["id"], closed=False, id=STR),
    "ImportStatus": obj(
        ["completed", "update_time"], closed=False, completed=BOOL, update_time={"type": "string", "format": "date-time"},
        ingested_objects=INT, metarange_id=STR, commit=ref("Commit"), error=ref("Error"),
    ),
    "User": obj(["id", "creation_date"], closed=False, id=STR, creation_date=INT, friendly_name=STR, email=STR),
    "UserList": listing("User"),
    "UserCreation": obj(["id"], id=STR, invite_user=BOOL),
    "CurrentUser": obj(["user"], closed=False, user=ref("User")),
    "Group": obj(["id", "creation_date"], closed=False, id=STR, name=STR, description=STR, creation_date=INT),
    "GroupList": listing("Group"),
    "GroupCreation": obj(["id"], id=STR, description=STR),
    "Statement": obj(
        ["effect", "resource", "action"], effect={"type": "string", "enum": ["allow", "deny"]}, resource=STR,
        action={"type": "array", "items": STR}, condition={"type": "object"},
    ),
    "Policy": obj(["id", "statement"], id=STR, creation_date=INT, statement={"type": "array", "items": ref("Statement")}),
    "PolicyList": listing("Policy"),
    "Credentials": obj(["access_key_id", "creation_date"], closed=False, access_key_id=STR, creation_date=INT),
    "CredentialsList": listing("Credentials"),
    "CredentialsWithSecret": obj(
        ["access_key_id", "secret_access_key", "creation_date"], closed=False,
        access_key_id=STR, secret_access_key=STR, creation_date=INT, user_name=STR,
    ),
    # Branch protection (required_approvals: lakemount's extension, for pull requests).
    "BranchProtectionRule": obj(["pattern"], pattern=STR, required_approvals={"type": "integer", "minimum": 0}),
    "BranchProtectionRules": {"type": "array", "items": ref("BranchProtectionRule")},
    # Garbage collection rules (lakeFS's GarbageCollectionRules).
    "GarbageCollectionRule": obj(["branch_id", "retention_days"], branch_id=STR, retention_days={"type": "integer", "minimum": 0}),
    "GarbageCollectionRules": obj(
        ["default_retention_days", "branches"],
        default_retention_days={"type": "integer", "minimum": 0},
        branches={"type": "array", "items": ref("GarbageCollectionRule")},
    ),
    # Actions (hooks) runs.
    "ActionRun": obj(
        ["run_id", "branch", "start_time", "event_type", "status", "commit_id"], closed=False,
        run_id=STR, branch=STR, start_time=STR, end_time=STR, event_type=STR, status=STR, commit_id=STR, source_ref=STR,
    ),
    "ActionRunList": listing("ActionRun"),
    "HookRun": obj(
        ["hook_run_id", "action", "hook_id", "start_time", "status"], closed=False,
        hook_run_id=STR, action=STR, hook_id=STR, start_time=STR, end_time=STR, status=STR,
    ),
    "HookRunList": listing("HookRun"),
    # Pull requests (comments and approvals: lakemount's extension).
    "PullRequest": obj(
        ["id", "status", "title", "description", "source_branch", "destination_branch", "author", "creation_date"], closed=False,
        id=STR, status=STR, title=STR, description=STR, source_branch=STR, destination_branch=STR, author=STR,
        creation_date=STR, closed_date=nullable(STR), merged_commit_id=nullable(STR),
    ),
    "PullRequestsList": listing("PullRequest"),
    "PullRequestCreation": obj(
        ["title", "source_branch", "destination_branch"], title=STR, description=STR, source_branch=STR, destination_branch=STR,
    ),
    "PullRequestCreationResponse": obj(["id"], closed=False, id=STR),
    "PullRequestBasic": obj([], status={"type": "string", "enum": ["open", "closed", "merged"]}, title=STR, description=STR),
    "PullRequestMerge": obj([], strategy={"type": "string", "enum": ["source-wins", "dest-wins"]}, squash_merge=BOOL, message=STR),
    "PullRequestComment": obj(["id", "author", "body", "creation_date"], closed=False, id=INT, author=STR, body=STR, creation_date=STR),
    "PullRequestCommentList": listing("PullRequestComment"),
    "PullRequestCommentCreation": obj(["body"], body=STR),
    # lakemount's own: the web UI's content diff and blame (api/object_diff.py, api/blame.py).
    "BlameEntry": obj(["path", "commit", "uncommitted", "beyond_depth"], closed=False, path=STR,
                      commit={"type": "object", "nullable": True, "description": "a Commit, or null"}, uncommitted=BOOL, beyond_depth=BOOL),
    "BlameList": obj(["results"], closed=False, results={"type": "array", "items": ref("BlameEntry")}),
    "ObjectDiffSide": obj(["ref", "exists"], closed=False, ref=STR, exists=BOOL, size_bytes=INT, checksum=STR,
                          content_type=STR, url=STR),
    "ObjectDiff": obj(["path", "kind", "left", "right"], closed=False, path=STR,
                      kind={"type": "string", "enum": ["text", "table", "image", "binary", "too_large"]},
                      left=ref("ObjectDiffSide"), right=ref("ObjectDiffSide")),
    "TextDiff": obj(["path", "view", "left", "right", "hunks", "counts"], closed=False, path=STR,
                    view={"type": "string", "enum": ["unified", "side_by_side"]}, left=ref("ObjectDiffSide"),
                    right=ref("ObjectDiffSide"), hunks={"type": "array", "items": {"type": "object"}},
                    counts={"type": "object", "additionalProperties": INT}),
    "TableDiff": obj(["path", "format", "key", "schema", "counts", "columns", "results", "pagination"], closed=False,
                     path=STR, format={"type": "string", "enum": ["csv", "parquet", "iceberg"]}, key={"type": "array", "items": STR},
                     schema={"type": "object"}, counts={"type": "object", "additionalProperties": INT},
                     columns={"type": "array", "items": STR}, results={"type": "array", "items": {"type": "object"}},
                     pagination=ref("Pagination")),
    # lakemount's own: the web UI's Iceberg table pages (api/iceberg_tables.py).
    "IcebergTableSummary": obj(["namespace", "name", "path"], closed=False,
                               namespace={"type": "array", "items": STR}, name=STR, path=STR, format_version=INT,
                               current_snapshot_id=nullable(STR), snapshots=INT, last_updated_ms=INT, error=STR),
    "IcebergTableList": obj(["results", "truncated"], closed=False, results={"type": "array", "items": ref("IcebergTableSummary")},
                            truncated=BOOL),
    "IcebergTable": obj(["namespace", "name", "path", "format_version", "schema", "partition_spec", "snapshots"], closed=False,
                        namespace={"type": "array", "items": STR}, name=STR, path=STR, format_version=INT,
                        table_uuid=STR, metadata_path=STR, current_snapshot_id=nullable(STR), properties={"type": "object"},
                        schema={"type": "object"}, partition_spec={"type": "object"},
                        snapshots={"type": "array", "items": {"type": "object"}}),
    "IcebergTableRows": obj(["path", "schema", "rows", "num_rows"], closed=False, path=STR,
                            schema={"type": "array", "items": {"type": "object"}}, rows={"type": "array", "items": {"type": "array"}},
                            num_rows=INT, data_files=INT, delete_files=INT, truncated=BOOL, snapshot_id=nullable(STR)),
    "IcebergTableDiffList": obj(["left", "right", "results", "truncated"], closed=False, left=STR, right=STR,
                                results={"type": "array", "items": {"type": "object"}}, truncated=BOOL),
}

_TYPES: Final[dict[str, tuple[type, ...]]] = {
    "string": (str,),
    "integer": (int,),
    "boolean": (bool,),
    "object": (dict,),
    "array": (list,),
}


def _resolve(schema: S) -> S:
    while "$ref" in schema:
        schema = COMPONENTS[schema["$ref"].rsplit("/", 1)[1]]
    return schema


def _check(value: Any, schema: S, where: str) -> None:
    schema = _resolve(schema)
    if value is None:
        if schema.get("nullable"):
            return
        raise ApiError(400, f"{where}: must not be null")
    kind = schema.get("type")
    if kind is not None:
        ok = isinstance(value, _TYPES[kind]) and not (kind == "integer" and isinstance(value, bool))
        if not ok:
            raise ApiError(400, f"{where}: expected {kind}")
    if "enum" in schema and value not in schema["enum"]:
        raise ApiError(400, f"{where}: must be one of {', '.join(map(str, schema['enum']))}")
    if kind == "integer" and "minimum" in schema and value < schema["minimum"]:
        raise ApiError(400, f"{where}: must be at least {schema['minimum']}")
    if kind == "object":
        props: dict[str, S] = schema.get("properties", {})
        for name in schema.get("required", ()):
            if name not in value:
                raise ApiError(400, f"{where}: missing required field {name!r}")
        extra = schema.get("additionalProperties", True)
        for name, item in value.items():
            if name in props:
                _check(item, props[name], f"{where}.{name}")
            elif extra is False:
                raise ApiError(400, f"{where}: unknown field {name!r}")
            elif isinstance(extra, dict):
                _check(item, extra, f"{where}.{name}")
    elif kind == "array":
        for i, item in enumerate(value):
            _check(item, schema.get("items", {}), f"{where}[{i}]")


def validate(value: Any, name: str) -> dict[str, Any]:
    """Check a decoded request body against component ``name``; raises ``ApiError`` (400) naming the field."""
    _check(value, COMPONENTS[name], "body")
    return value  # type: ignore[no-any-return]
