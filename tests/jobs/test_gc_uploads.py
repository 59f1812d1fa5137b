"""GC and direct uploads: an address handed out for upload is kept while it may still be linked, collected after.

``getPhysicalAddress`` (``Catalog.issue_link_address``) hands out
``data/<aa>/<random>`` and writes a marker with the link deadline; until a
client links it nothing references the object, so without the marker a GC
run with a small ``min_age`` would trash an upload in progress.
"""

from __future__ import annotations

import hashlib
import os
import time
from typing import Any

import pytest

from lakemount.app import App
from lakemount.block.trash import trash_key
from lakemount.catalog.model import upload_entry
from lakemount.catalog.uploads import LINK_SECONDS, LINKS_PREFIX
from lakemount.errors import ObjectNotFound
from lakemount.graveler.committed.store import join
from lakemount.jobs.gc import LINK_CLOCK_SLACK, run_gc
from lakemount.jobs.retention import GcRules, store_rules

pytestmark = [pytest.mark.spark]


def _upload(app: App, signed_address: str, data: bytes) -> str:
    """Write ``data`` where a client would, made old enough for any GC; returns the namespace-relative key."""
    url = signed_address.rpartition(",")[0]
    path = url[len("local://") :]
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)
    t = time.time() - 3 * 86400
    os.utime(path, (t, t))
    return url[len(app.catalog.repository("lake").storage_namespace) + 1 :]


def test_unlinked_upload_is_kept_while_linkable_and_collected_after(app: App, spark: Any) -> None:
    cat = app.catalog
    cat.create_repository("lake")
    ns = cat.repository("lake").storage_namespace
    store_rules(app.adapter, ns, GcRules(1, ()))
    pending = cat.issue_link_address("lake", "main", "pending", presigned=False)
    expired = cat.issue_link_address("lake", "main", "late", presigned=False,
                                     now=time.time() - LINK_SECONDS - LINK_CLOCK_SLACK - 60)
    pending_key = _upload(app, pending.physical_address, b"still linkable")
    expired_key = _upload(app, expired.physical_address, b"never linked")
    time.sleep(1.2)  # min-age 0 still spares objects modified in the last second

    report = run_gc(app, "lake", min_age=0)
    assert report["kept"]["linkable_uploads"] == 1
    # The linkable upload stays; the one whose deadline passed is garbage like any other.
    assert app.adapter.exists(join(ns, pending_key))
    assert not app.adapter.exists(join(ns, expired_key))
    assert app.adapter.exists(join(ns, trash_key(expired_key) or ""))
    markers = sorted(i.url.rsplit("/", 1)[1].split(".")[0] for i in app.adapter.list(join(ns, LINKS_PREFIX)))
    assert markers == [pending_key.rsplit("/", 1)[1]]  # the expired marker went with it
    # Linking it after the run works and its bytes are then referenced.
    data = b"still linkable"
    linked = cat.verify_link("lake", "main", "pending", pending.physical_address, size=len(data),
                             checksum=hashlib.md5(data).hexdigest())
    cat.put_entry("lake", "main", "pending", upload_entry(linked.address, linked.size, linked.etag, "pending", "", ()))
    assert cat.read(cat.repository("lake"), cat.stat("lake", "main", "pending")) == data
    # The expired one cannot be linked (its address expired, and its bytes are in the trash).
    with pytest.raises(ObjectNotFound):
        app.blockstore.stat(join(ns, expired_key))
