"""Every page of the web UI, on one seeded repository: what the accessibility test (tests/ui/test_live.py) checks
with axe-core and what ``scripts/screenshots.py`` photographs, in light and dark.

``seed_tour`` makes a repository with data, an Iceberg table, two commits, a branch, a tag, an open pull request, a hook run,
protection and GC rules and an uncommitted change; ``tour_pages`` lists each page as (name, hash route,
selector that says the page is drawn). Dialogs (the import dialog, the shortcuts help) are pages too.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import requests

from tests.api.conftest import Served
from tests.api.test_http import AUTH

ROOT = Path(__file__).resolve().parents[2]
AXE = ROOT / "node_modules" / "axe-core" / "axe.min.js"
CHECK = b"""name: data-check
on: {pre-merge: {branches: [main]}}
hooks: [{id: csv_only, type: lakemount_check, properties: {formats: [csv]}}]
"""


@dataclass(frozen=True)
class Tour:
    repo: str
    commit: str
    pull: int


def seed_tour(served: Served, prefix: str = "tour") -> Tour:
    """A repository with something on every page (see the module's docstring)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    repo = served.repo(prefix=prefix)
    rid = str(repo.id)
    main = repo.branch("main")
    buf = io.BytesIO()
    pq.write_table(pa.table({"id": list(range(20)), "amount": [i * 1.5 for i in range(20)]}), buf)
    main.object("_lakefs_actions/check.yaml").upload(CHECK)
    main.object("data/events.parquet").upload(buf.getvalue())
    main.object("data/people.csv").upload(b"id,name\n1,ada\n2,grace\n")
    main.object("docs/readme.txt").upload(b"hello\n")
    _iceberg_table(served, rid)
    main.commit(message="first load", metadata={"source": "tour"})
    main.object("data/people.csv").upload(b"id,name\n1,ada\n2,grace\n3,linus\n")
    commit = main.commit(message="add linus").get_commit().id
    feat = repo.branch("feat").create(source_reference="main")
    feat.object("data/more.csv").upload(b"id\n9\n")
    feat.commit(message="more data")
    repo.tag("v1").create("main")
    main.object("data/staged.txt").upload(b"not yet committed\n")
    api = f"{served.api}/api/v1/repositories/{rid}"
    r = requests.put(f"{api}/settings/branch_protection", json=[{"pattern": "main", "required_approvals": 1}], auth=AUTH, timeout=30)
    assert r.status_code == 204, r.text
    r = requests.put(f"{api}/settings/gc_rules", json={"default_retention_days": 21, "branches": [{"branch_id": "main", "retention_days": 90}]},
                     auth=AUTH, timeout=30)
    assert r.status_code < 300, r.text
    r = requests.post(f"{api}/pulls", json={"source_branch": "feat", "destination_branch": "main", "title": "More data",
                                            "description": "adds more.csv"}, auth=AUTH, timeout=30)
    assert r.status_code < 300, r.text
    pull = int(r.json()["id"])
    requests.post(f"{api}/pulls/{pull}/comments", json={"body": "looks right"}, auth=AUTH, timeout=30).raise_for_status()
    return Tour(rid, commit, pull)


def _iceberg_table(served: Served, rid: str) -> None:
    """An Iceberg table ``db.orders`` on main, through the catalog with pyiceberg: a partition spec, two snapshots."""
    import pyarrow as pa
    from pyiceberg.partitioning import PartitionField, PartitionSpec
    from pyiceberg.schema import Schema
    from pyiceberg.transforms import IdentityTransform
    from pyiceberg.types import LongType, NestedField, StringType

    from tests.iceberg.conftest import iceberg_catalog

    cat = iceberg_catalog(served)
    cat.create_namespace((rid, "main", "db"))
    schema = Schema(NestedField(1, "id", LongType(), required=True), NestedField(2, "region", StringType(), required=False),
                    identifier_field_ids=[1])
    table = cat.create_table((rid, "main", "db", "orders"), schema=schema,
                             partition_spec=PartitionSpec(PartitionField(2, 1000, IdentityTransform(), "region")))
    rows = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("region", pa.string())])
    table.append(pa.table({"id": [1, 2, 3], "region": ["eu", "us", "eu"]}, schema=rows))
    table.append(pa.table({"id": [4], "region": ["us"]}, schema=rows))


def tour_pages(t: Tour) -> list[tuple[str, str, str]]:
    """(name, hash route, selector present once the page is drawn) for every page; "" routes are special steps."""
    r = t.repo
    return [
        ("repositories", "#/", "#repos"),
        ("objects", f"#/r/{r}/tree/main", "#listing"),
        ("objects-dir", f"#/r/{r}/tree/main/data/", "#listing >> text=people.csv"),
        ("objects-filtered", f"#/r/{r}/tree/main/data/?name=peo", "#listing >> text=people.csv"),
        ("object-parquet", f"#/r/{r}/object/main?path=data%2Fevents.parquet", "#preview[data-kind=parquet]"),
        ("object-csv", f"#/r/{r}/object/main?path=data%2Fpeople.csv", "#preview[data-kind=csv]"),
        ("tables", f"#/r/{r}/tables/main", "#tables"),
        ("table", f"#/r/{r}/table/main?path=db%2Forders%2F", "#table-preview"),
        ("commits", f"#/r/{r}/commits/main", "#commits"),
        ("commits-search", f"#/r/{r}/commits/main?search=linus", "#commits"),
        ("commit", f"#/r/{r}/commit/{t.commit}", "#diff"),
        ("history", f"#/r/{r}/history/main?path=data%2Fpeople.csv", "#history"),
        ("compare", f"#/r/{r}/compare/main/feat", "#counts >> text=added"),
        ("uncommitted", f"#/r/{r}/changes/main", "#changes"),
        ("branches-tags", f"#/r/{r}/refs/main", "#branches"),
        ("pulls", f"#/r/{r}/pulls", "#pulls"),
        ("pull", f"#/r/{r}/pull/{t.pull}", "#comments .comment"),
        ("hook-runs", f"#/r/{r}/actions", "#runs-page"),
        ("live-feed", f"#/r/{r}/feed", "#feed-status >> text=live"),
        ("audit", f"#/r/{r}/audit", "#audit"),
        ("settings", f"#/r/{r}/settings", "#gc-rules"),
        ("users", "#/admin/users", "#users"),
        ("user", "#/admin/users/admin", "#keys"),
        ("groups", "#/admin/groups", "#groups"),
        ("policies", "#/admin/policies", "#policies"),
        ("import-dialog", f"#/r/{r}/tree/main", "#import-dialog[open]"),
        ("shortcuts-help", f"#/r/{r}/tree/main", "#help-dialog[open]"),
        ("not-found", f"#/r/{r}/tree/no-such-branch", "#page-error"),
    ]


def visit(page: Any, base: str, name: str, route: str, ready: str) -> None:
    """Show one tour page (opening its dialog for the dialog steps) and wait until it is drawn and settled."""
    page.goto("about:blank")
    page.goto(base + "/" + route)
    if name == "import-dialog":
        page.wait_for_selector("#import-open:not([disabled])")
        page.click("#import-open")
    elif name == "shortcuts-help":
        page.wait_for_selector("#listing")
        page.keyboard.press("?")
    page.wait_for_selector(ready)
    page.wait_for_function("() => !document.getElementById('main').hasAttribute('aria-busy')")
    page.evaluate("document.getAnimations().forEach(a => a.finish())")


def login_page(page: Any, base: str, key: str, secret: str) -> None:
    """Log in through the login page (the tour's first stop is that page itself)."""
    page.goto(base + "/login")
    page.fill("#access_key_id", key)
    page.fill("#secret_access_key", secret)
    page.click("#login")
    page.wait_for_selector("#main h2 >> text=Repositories")


def axe_violations(page: Any) -> list[dict[str, Any]]:
    """axe-core's serious and critical violations on the page shown (axe injected from node_modules, pinned in
    package-lock.json; the context bypasses the page's CSP, which allows only the server's own scripts)."""
    if not page.evaluate("typeof window.axe !== 'undefined'"):
        page.evaluate(AXE.read_text())
    found = page.evaluate("""async () => {
      const r = await axe.run(document, {resultTypes: ["violations"]});
      return r.violations.filter(v => v.impact === "serious" || v.impact === "critical")
        .map(v => ({id: v.id, impact: v.impact, help: v.help, nodes: v.nodes.slice(0, 5).map(n => n.target.join(" ") + ": " + n.failureSummary)}));
    }""")
    return list(found)
