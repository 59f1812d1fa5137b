"""The API's route table: every operation it serves, one line each, grouped by resource module.

Nothing registers itself: a module under ``operations/`` declares its operations (``routing.operation``) and
this table lists them, so this file is the whole answer to "what does the API serve".  No path matches two
routes (``tests/api/test_routes.py``), so the order is the reader's, not the router's; ``docs/API.md``'s route
table is printed from it (``scripts/route_table.py``, checked by ``tests/test_docs.py``).
"""

from __future__ import annotations

from typing import Final

from lakemount.api.operations import (
    audit,
    blame,
    branches,
    commits,
    events,
    iceberg_tables,
    imports,
    object_diff,
    objects,
    preview,
    pulls,
    refs,
    repositories,
    rules,
    setup,
    staging,
    tags,
    users,
)
from lakemount.api.routing import Operation

ROUTES: Final[tuple[Operation, ...]] = (
    # setup.py
    setup.health_check,
    setup.get_version,
    setup.get_storage_config,
    setup.get_config,
    setup.login,
    setup.logout,
    setup.current_user,
    setup.openapi_document,
    # repositories.py
    repositories.list_repositories,
    repositories.create_repository,
    repositories.get_repository,
    repositories.delete_repository,
    repositories.get_repository_metadata,
    repositories.get_repository_permissions,
    # branches.py
    branches.list_branches,
    branches.create_branch,
    branches.get_branch,
    branches.delete_branch,
    branches.reset_branch,
    branches.hard_reset_branch,
    branches.revert_branch,
    branches.cherry_pick,
    branches.commit,
    branches.diff_branch,
    # refs.py
    refs.log_commits,
    refs.diff_refs,
    refs.merge_into_branch,
    refs.find_merge_base,
    # commits.py
    commits.get_commit,
    # tags.py
    tags.list_tags,
    tags.create_tag,
    tags.get_tag,
    tags.delete_tag,
    # objects.py
    objects.stat_object,
    objects.get_object,
    objects.head_object,
    objects.upload_object,
    objects.delete_object,
    objects.delete_objects,
    objects.list_objects,
    objects.copy_object,
    # staging.py
    staging.get_physical_address,
    staging.link_physical_address,
    # imports.py
    imports.import_start,
    imports.import_status,
    imports.import_cancel,
    # rules.py
    rules.get_rules,
    rules.set_rules,
    rules.get_rules_old,
    rules.add_rule,
    rules.delete_rule,
    rules.list_runs,
    rules.get_run,
    rules.list_run_hooks,
    rules.hook_output,
    rules.get_gc_rules,
    rules.set_gc_rules,
    rules.delete_gc_rules,
    # pulls.py
    pulls.list_pulls,
    pulls.create_pull,
    pulls.get_pull,
    pulls.update_pull,
    pulls.merge_pull,
    pulls.list_comments,
    pulls.create_comment,
    pulls.approve,
    # events.py
    events.events,
    # preview.py
    preview.preview_object,
    # object_diff.py
    object_diff.diff_object,
    object_diff.diff_object_text,
    object_diff.diff_object_table,
    # iceberg_tables.py
    iceberg_tables.list_tables,
    iceberg_tables.get_table,
    iceberg_tables.preview_rows,
    iceberg_tables.diff_tables,
    iceberg_tables.diff_table_rows,
    # blame.py
    blame.blame_objects,
    # audit.py
    audit.get_audit_log,
    audit.list_audit_operations,
    # users.py
    users.list_users,
    users.create_user,
    users.get_user,
    users.delete_user,
    users.list_credentials,
    users.create_credentials,
    users.get_credentials,
    users.delete_credentials,
    users.list_policies,
    users.create_policy,
    users.get_policy,
    users.delete_policy,
    users.list_user_policies,
    users.attach_policy,
    users.detach_policy,
    users.list_groups,
    users.create_group,
    users.get_group,
    users.delete_group,
    users.list_group_members,
    users.add_group_membership,
    users.delete_group_membership,
    users.list_group_policies,
    users.attach_group_policy,
    users.detach_group_policy,
    users.list_user_groups,
)
