"""Every operation the audit trail records, by front end, and whether it reads, writes or does something else.

The one list of the ``op`` column's values: the gateway and the API record the
operations named here for them (their ``AUDITED`` tables are made from it),
the catalog's feed reports the versioning verbs (``catalog/events.py``; every
front end, and each edge records a failed one under the same name), the mount,
the CLI, the jobs and the Iceberg catalog record theirs by name, and
``tests/audit/test_operations.py`` finds every name they pass in the code and
checks it is here.  The API serves it (``listAuditOperations``), so the web
UI's operation filter offers what is recorded, not a hand list of its own, and
``kind=write`` asks for every write at once.

A *write* changes what a repository holds or how it may change: objects,
tables, refs, history, protection rules.  *Other* are the review records of
pull requests and the hooks' runs (the merge of a pull request is a ``merge``
record of its own).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal

from lakemount.audit.record import API, CLI, GATEWAY, ICEBERG, JOBS, MOUNT

Kind = Literal["read", "write", "other"]
KINDS: Final[tuple[Kind, ...]] = ("read", "write", "other")
VERSIONING: Final = "versioning"  # the catalog's verbs: recorded whichever front end ran them


@dataclass(frozen=True, slots=True)
class Operation:
    """One value of the ``op`` column: its name, who records it, what it does, in a few words."""

    name: str
    frontend: str  # a front end of record.py, or VERSIONING
    kind: Kind
    summary: str

    @property
    def writes(self) -> bool:
        """Whether the operation changes data, tables, refs, history or rules."""
        return self.kind == "write"


def _ops(frontend: str, kind: Kind, **named: str) -> tuple[Operation, ...]:
    return tuple(Operation(name.replace("_", "-") if frontend == VERSIONING else name, frontend, kind, summary)
                 for name, summary in named.items())


OPERATIONS: Final[tuple[Operation, ...]] = (
    # The catalog's feed: commits, merges, refs and rules, whichever front end asked (catalog/events.py KINDS).
    *_ops(VERSIONING, "write", commit="a commit", merge="a merge (also a pull request's)", revert="a revert",
          cherry_pick="a cherry-pick", reset="uncommitted changes dropped",
          branch_created="a branch created", branch_deleted="a branch deleted", tag_created="a tag created",
          tag_deleted="a tag deleted", protection="branch protection rules changed"),
    *_ops(VERSIONING, "other", pull_request="a pull request opened, merged or closed",
          pull_request_comment="a pull request comment", pull_request_approval="a pull request approval",
          hook_run="a hook ran"),
    # The S3 gateway (gateway/handler.py), under S3's names.
    *_ops(GATEWAY, "read", GetObject="S3 GetObject", HeadObject="S3 HeadObject", ListObjects="S3 ListObjects",
          ListObjectsV2="S3 ListObjectsV2"),
    *_ops(GATEWAY, "write", PutObject="S3 PutObject", CopyObject="S3 CopyObject", DeleteObject="S3 DeleteObject",
          DeleteObjects="S3 DeleteObjects", CompleteMultipartUpload="S3 multipart upload completed"),
    # The REST API (api/handler.py), under its operation ids.
    *_ops(API, "read", statObject="API object stat", getObject="API object read", headObject="API object head",
          listObjects="API listing"),
    *_ops(API, "write", uploadObject="API upload", copyObject="API copy", deleteObject="API delete",
          deleteObjects="API delete of several objects",
          linkPhysicalAddress="API link of an object uploaded to a handed-out address"),
    # The mount (fuse/auditing.py): one record per handle at release, one per listing.
    *_ops(MOUNT, "read", read="a file read through the mount", list="a directory listed through the mount"),
    *_ops(MOUNT, "write", write="a file written through the mount"),
    # CLI verbs (cli/fs.py); their versioning verbs are the catalog's.
    *_ops(CLI, "read", ls="lakemount fs ls", cat="lakemount fs cat", stat="lakemount fs stat"),
    *_ops(CLI, "write", upload="lakemount fs upload", rm="lakemount fs rm"),
    # Batch jobs (jobs/).
    *_ops(JOBS, "write", **{"import": "an import onto a branch"}),
    *_ops(JOBS, "read", export="an export of a ref"),
    # The Iceberg REST catalog (iceberg/service.py), under the protocol's names.
    *_ops(ICEBERG, "write", createNamespace="Iceberg namespace created", dropNamespace="Iceberg namespace dropped",
          updateProperties="Iceberg namespace properties changed", createTable="Iceberg table created",
          updateTable="Iceberg table commit", commitTransaction="Iceberg multi-table commit (a record per table)",
          registerTable="Iceberg table registered", renameTable="Iceberg table renamed",
          dropTable="Iceberg table dropped", createView="Iceberg view created", replaceView="Iceberg view replaced",
          dropView="Iceberg view dropped", renameView="Iceberg view renamed", registerView="Iceberg view registered"),
)

BY_NAME: Final = {op.name: op for op in OPERATIONS}
assert len(BY_NAME) == len(OPERATIONS), "an operation name is listed twice"


def names(*, frontend: str | None = None, kind: Kind | None = None) -> frozenset[str]:
    """The names of the operations recorded by ``frontend`` (a front end or VERSIONING) and of ``kind``."""
    return frozenset(op.name for op in OPERATIONS
                     if (frontend is None or op.frontend == frontend) and (kind is None or op.kind == kind))
