"""Listings past staged deletions (stop 55): a long listing, with or without a delimiter, costs the same past
thousands of staged deletions as past a few (S3A's job commit lists a dataset's root past every task attempt's
files moved out of ``_temporary/``), and lists what a reference over the branch's keys lists."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from lakemount.app import App
from lakemount.catalog.catalog import Catalog
from lakemount.config import load
from lakemount.graveler import reads as reads_module
from lakemount.graveler.model import Entry
from tests.catalog._listing import counting

R = "lst"
BACKENDS = ("sql", "lsm")


def make_app(home: Path, backend: str, pg_url: str = "") -> App:
    env = {"LAKEMOUNT_HOME": str(home), "LAKEMOUNT_CACHE_DISK_BYTES": "0", "LAKEMOUNT_STAGING_BACKEND": backend}
    if pg_url:
        env |= {"LAKEMOUNT_METADATA_DB_URL": pg_url, "LAKEMOUNT_AUDIT_ENABLED": "false"}
    return App(load(env=env))


def value(path: str) -> bytes:
    return Entry(f"data/{path}", len(path), etag=path).value()


def stage(cat: Catalog, repo: str, puts: list[str], deletes: list[str]) -> None:
    if puts:
        cat.stage_records(repo, "main", [(p.encode(), value(p)) for p in puts])
    if deletes:
        cat.stage_records(repo, "main", [(p.encode(), None) for p in deletes])


def reference(keys: list[str], prefix: str, delimiter: str, after: str, limit: int | None) -> list[tuple[str, bool]]:
    """What a listing returns, from the branch's live keys (S3's ListObjectsV2 over them)."""
    out: list[tuple[str, bool]] = []
    last = None
    for k in sorted(keys):
        if not k.startswith(prefix) or k <= after:
            continue
        i = k.find(delimiter, len(prefix)) if delimiter else -1
        if i >= 0:
            common = k[: i + len(delimiter)]
            if common <= after or common == last:
                continue
            last = common
            out.append((common, True))
        else:
            out.append((k, False))
    return out if limit is None else out[:limit]


def listed(cat: Catalog, repo: str, prefix: str, delimiter: str, after: str, limit: int | None) -> list[tuple[str, bool]]:
    return [(x.path, x.is_prefix) for x in cat.list(repo, "main", prefix, delimiter=delimiter, after=after, limit=limit)]


@pytest.mark.parametrize("backend", BACKENDS)
def test_listings_past_runs_of_staged_deletions_list_what_a_reference_lists(
    tmp_path: Path, backend: str, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Committed keys, staged keys over them, and runs of staged deletions (of committed keys and of staged
    ones, whole subtrees and single keys), listed with prefixes, delimiters, start points and limits, with the
    scan's pages and its run before a seek made small so every listing seeks and turns pages."""
    monkeypatch.setattr(reads_module, "SCAN_PAGE_FIRST", 5)
    monkeypatch.setattr(reads_module, "SEEK_PAGE", 3)
    monkeypatch.setattr(reads_module, "SEEK_AFTER", 2)
    monkeypatch.setattr(reads_module, "SCAN_PAGE_MAX", 10)
    cat = make_app(tmp_path / "home", backend).catalog
    cat.create_repository(R)
    rnd = random.Random(55)
    dirs = ["", "a/", "a/_temporary/0/", "a/_temporary/0/_temporary/", "b/", "b/c/", "d/"]
    committed = sorted({f"{d}{rnd.choice('fpq')}{n:02d}" for d in dirs for n in range(0, 40, 3)})
    stage(cat, R, committed, [])
    cat.commit(R, "main", "base")
    live = set(committed)
    # Task attempts: files staged then deleted (runs far longer than SEEK_AFTER), a live marker among them.
    attempts = [f"a/_temporary/0/_temporary/attempt_{i:03d}/part-0" for i in range(60)]
    stage(cat, R, [*attempts, "a/_temporary/0/_temporary/"], [])
    stage(cat, R, [], attempts[:50] + attempts[52:58])
    live |= {*attempts[50:52], *attempts[58:], "a/_temporary/0/_temporary/"}
    # Scattered staged puts and deletes, committed and not.
    extra = sorted({f"{rnd.choice(dirs)}{rnd.choice('fgpz')}{rnd.randrange(40):02d}" for _ in range(80)})
    stage(cat, R, extra, [])
    live |= set(extra)
    gone = [k for k in sorted(live) if rnd.random() < 0.5 and not k.startswith("a/_temporary/0/_temporary/")]
    stage(cat, R, [], gone)
    live -= set(gone)
    # A whole committed subtree deleted: committed keys hidden by a run of deletions.
    whole = [k for k in sorted(live) if k.startswith("b/c/")]
    stage(cat, R, [], whole)
    live -= set(whole)
    keys = sorted(live)
    assert len(keys) > 40
    afters = ["", "a/", "a/_temporary/", "a/_temporary/0/_temporary/attempt_010/", "b/", "b/c/p03", "c", keys[len(keys) // 2]]
    prefixes = ["", "a/", "a/_temporary/0/_temporary/", "b/", "b/c/", "d/", "e/"]
    cases = 0
    for prefix in prefixes:
        for delimiter in ("", "/"):
            for after in afters:
                for limit in (None, 2, 4, 7, 1000):
                    want = reference(keys, prefix, delimiter, after, limit)
                    assert listed(cat, R, prefix, delimiter, after, limit) == want, (prefix, delimiter, after, limit)
                    cases += 1
    # The mount's and the raw readers' scan: every live record, in order, none of the deleted.
    assert [k.decode() for k, _ in cat.scan_records(R, "main")] == keys
    assert [k.decode() for k, _ in cat.scan_records(R, "main", b"a/", b"b0")] == [k for k in keys if "a/" <= k < "b0"]
    assert cases == len(prefixes) * 2 * len(afters) * 5


def long_listings(
    home: Path, backend: str, deletions: int, monkeypatch: pytest.MonkeyPatch, pg_url: str = "", repo: str = R,
) -> dict[str, tuple[int, int]]:
    """(statements, staged deletions read) of S3A's two long listings of a dataset after its tasks moved
    ``deletions`` files out of ``_temporary/``: the root with delimiter ``/``, and everything below it."""
    cat = make_app(home, backend, pg_url).catalog
    cat.create_repository(repo)
    stage(cat, repo, [f"ds/part-{i:05d}" for i in range(0, 400, 2)], [])
    cat.commit(repo, "main", "base")
    attempts = [f"ds/_temporary/0/_temporary/attempt_{i:06d}/part-0" for i in range(deletions)]
    stage(cat, repo, ["ds/_temporary/0/_temporary/", *attempts], [])
    stage(cat, repo, [f"ds/part-{i:05d}" for i in range(1, 400, 2)], attempts)
    want_root = [("ds/_temporary/", True), *[(f"ds/part-{i:05d}", False) for i in range(400)]]
    out: dict[str, tuple[int, int]] = {}
    cat.list(repo, "main", "ds/", limit=1)  # the branch is known to the process, as on a gateway serving a job
    for name, delimiter in (("root", "/"), ("all", "")):
        list(cat.list(repo, "main", "ds/", delimiter=delimiter, limit=1000))  # warm: the tree's ranges read once
        with counting(cat, monkeypatch) as seen:
            got = listed(cat, repo, "ds/", delimiter, "", 1000)
        want = want_root if delimiter else [("ds/_temporary/0/_temporary/", False), *want_root[1:]]
        assert got == want, (name, got[:5])
        out[name] = (seen.calls, seen.deletions)
    return out


def check_costs(few: dict[str, tuple[int, int]], many: dict[str, tuple[int, int]], deletions: int) -> None:
    for name in ("root", "all"):
        (calls_few, _), (calls_many, read_many) = few[name], many[name]
        # Past a run, the scan seeks: it reads no more than SEEK_AFTER deletions of it (plus a page's worth it
        # had fetched), whatever the run's length, and asks as many statements as past a short run.
        assert read_many <= reads_module.SEEK_AFTER + reads_module.SCAN_PAGE_FIRST, (name, read_many, deletions)
        assert calls_many <= calls_few + 2, (name, calls_few, calls_many)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_long_listing_costs_the_same_past_thousands_of_staged_deletions(
    tmp_path: Path, backend: str, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The job commit's listing of a dataset's root (max-keys 1000, delimiter ``/``) and a recursive one, past
    400 and past 6,000 staged deletions under ``_temporary/``: the statements and the deletions read are the
    same (before stop 55 the scan read every deletion, a page of up to 5,000 in its first statement)."""
    few = long_listings(tmp_path / "few", backend, 400, monkeypatch)
    many = long_listings(tmp_path / "many", backend, 6000, monkeypatch)
    check_costs(few, many, 6000)


@pytest.mark.postgres
def test_a_long_listing_costs_the_same_past_thousands_of_staged_deletions_on_postgresql(
    tmp_path: Path, pg_url: str, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The same on PostgreSQL, both staging backends (one database: each backend its own repository home)."""
    for backend in BACKENDS:
        few = long_listings(tmp_path / f"few-{backend}", backend, 400, monkeypatch, pg_url, f"few-{backend}")
        many = long_listings(tmp_path / f"many-{backend}", backend, 6000, monkeypatch, pg_url, f"many-{backend}")
        check_costs(few, many, 6000)
