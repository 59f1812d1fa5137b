"""Recorded runs: the SQL run store pages newest first (``actions/runs.py``, ``metastore/actions.py``)."""

from __future__ import annotations

import pytest

from lakemount.catalog.catalog import Catalog
from lakemount.errors import NotFound
from lakemount.metastore.actions import SqlRunStore
from tests.actions.conftest import R, action


def test_sql_run_store_pages_newest_first(cat: Catalog) -> None:
    store = cat.actions.store
    assert isinstance(store, SqlRunStore)
    action(cat, "main", "c", "name: n\non: {post-commit: {}}\nhooks: [{id: x, type: lakemount_check}]")
    ids = [cat.commit(R, "main", f"c{i}", allow_empty=True).commit.id for i in range(5)]
    runs = store.list_runs(R)
    assert [r.commit_id for r in runs] == ids[::-1]
    page = store.list_runs(R, limit=2)
    rest = store.list_runs(R, after=page[-1].run_id)
    assert [r.run_id for r in page + rest] == [r.run_id for r in runs]
    assert store.list_runs(R, commit_id=ids[2])[0].commit_id == ids[2]
    with pytest.raises(NotFound):
        store.get_run(R, "nope")
