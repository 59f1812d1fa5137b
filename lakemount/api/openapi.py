"""The OpenAPI 3.0 document of what this API implements, built from the route table and the schemas.

Served at ``/api/v1/openapi.json``.  It lists only implemented operations,
in lakeFS's paths, operation ids and shapes; ``x-lakemount-omitted`` names
what lakeFS has and lakemount leaves out (see docs/API.md).
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any, Final

from lakemount.api.routing import Operation
from lakemount.api.schemas import COMPONENTS

OMITTED: Final = [
    "presigned URLs on the local block store (presign=true is a 400 there; S3 presigns), presigned multipart uploads, "
    "linking addresses getPhysicalAddress did not hand out (such as ones outside the storage namespace)",
    "group ACLs (getGroupACL, setGroupACL: lakeFS's simplified ACL mode)",
    "updatePolicy, external principals, OIDC/SAML/STS login, tokens other than /auth/login's",
    "metaranges and ranges (ingestRange, createMetaRange), commit record creation, dump/restore of refs",
    "repository metadata setting, read-only and bare repositories",
    "statistics, usage reports, licensing, setup_lakefs, comm prefs, templates, async operations",
    "commit_overrides on revert and cherry-pick, source_metarange on commit",
]

_STATUS_TEXT: Final = {
    200: "OK", 201: "created", 202: "accepted", 204: "no content", 206: "partial content", 302: "found",
    304: "not modified",
    400: "bad request", 401: "unauthorized", 403: "forbidden", 404: "not found", 405: "method not allowed",
    408: "request timeout", 409: "conflict", 412: "precondition failed", 413: "payload too large",
    415: "unsupported media type", 416: "range not satisfiable", 429: "too many failed attempts to authenticate",
}


def _param_schema(p: Any) -> dict[str, Any]:
    base: dict[str, Any] = {"type": p.type}
    if p.minimum is not None:
        base["minimum"] = p.minimum
    if p.maximum is not None:
        base["maximum"] = p.maximum
    return {"type": "array", "items": base} if p.array else base


def _operation(op: Operation) -> dict[str, Any]:
    params: list[dict[str, Any]] = []
    for name in op.pattern.groupindex:
        params.append({"name": name, "in": "path", "required": True, "schema": {"type": "string", "minLength": 1}})
    for p in op.params:
        d: dict[str, Any] = {"name": p.name, "in": p.where, "required": p.required, "schema": _param_schema(p)}
        if p.array:
            d["style"] = "form"
            d["explode"] = True
        if p.description:
            d["description"] = p.description
        params.append(d)
    out: dict[str, Any] = {"operationId": op.operation_id, "tags": [op.tag], "summary": op.summary, "parameters": params}
    if op.body == "raw":
        out["requestBody"] = {"required": True, "content": {
            "application/octet-stream": {"schema": {"type": "string", "format": "binary"}},
            "multipart/form-data": {"schema": {"type": "object", "properties": {"content": {"type": "string", "format": "binary"}}}},
        }}
    elif op.body is not None:
        out["requestBody"] = {"required": op.body_required, "content": {
            "application/json": {"schema": {"$ref": f"#/components/schemas/{op.body}"}}}}
    ok: dict[str, Any] = {"description": _STATUS_TEXT.get(op.status, "success")}
    if op.response is not None:
        ok["content"] = {"application/json": {"schema": {"$ref": f"#/components/schemas/{op.response}"}}}
    elif op.content_type == "text/event-stream":
        # Each server-sent event, as clients (and schemathesis) parse it: its id, type and JSON data as text.
        event = {"type": "object", "properties": {"id": {"type": "string"}, "event": {"type": "string"}, "data": {"type": "string"}}}
        ok["content"] = {op.content_type: {"schema": event}}
    elif op.content_type not in ("", "application/json") and op.status != 204 and op.method != "HEAD":
        ok["content"] = {op.content_type: {"schema": {"type": "string"}}}
    responses: dict[str, Any] = {str(op.status): ok}
    if op.operation_id == "getObject":
        responses["302"] = {"description": "presign=true: redirect to a presigned GET URL of the data",
                            "headers": {"Location": {"schema": {"type": "string"}}}}
        responses["206"] = {"description": "partial content", "content": {"application/octet-stream": {"schema": {"type": "string"}}}}
        responses["304"] = {"description": "not modified"}
    if op.operation_id == "headObject":
        responses["206"] = {"description": "partial content"}
    # 429: basic auth's secret is checked on every authenticated operation, and failures back off (auth/throttle.py).
    for code in sorted({*op.errors, 400, *((401, 403, 429) if op.auth else ()), 413, 415, 405}):
        if op.method == "HEAD":
            responses[str(code)] = {"description": _STATUS_TEXT.get(code, "error")}
        else:
            responses[str(code)] = {"description": _STATUS_TEXT.get(code, "error"), "content": {
                "application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}}
    out["responses"] = responses
    if not op.auth:
        out["security"] = []
    return out


@lru_cache(maxsize=1)
def document(routes: tuple[Operation, ...]) -> dict[str, Any]:
    """The OpenAPI document of the operations ``routes`` lists (``routes.ROUTES``; built once per process)."""
    paths: dict[str, dict[str, Any]] = {}
    for op in routes:
        if op.operation_id == "getOpenAPI":
            continue
        paths.setdefault(op.template, {})[op.method.lower()] = _operation(op)
    return {
        "openapi": "3.0.3",
        "info": {
            "title": "lakemount API",
            "version": "1.0.0",
            "description": "The subset of lakeFS's API (treeverse/lakeFS api/swagger.yml) that lakemount implements, "
                           "in lakeFS's paths and shapes, for lakeFS's own clients (lakefs-sdk, lakefs, lakefs-spec). "
                           "Left out: " + "; ".join(OMITTED) + ".",
        },
        "x-lakemount-omitted": OMITTED,
        "servers": [{"url": "/api/v1"}],
        "security": [{"basic_auth": []}, {"jwt_token": []}, {"cookie_auth": []}],
        "components": {
            "securitySchemes": {
                "basic_auth": {"type": "http", "scheme": "basic"},
                "jwt_token": {"type": "http", "scheme": "bearer", "bearerFormat": "JWT"},
                "cookie_auth": {"type": "apiKey", "in": "cookie", "name": "internal_auth_session"},
            },
            "schemas": COMPONENTS,
        },
        "paths": paths,
    }
