"""Garbage collection as a Spark job: mark what is still referenced, move the rest to a trash, empty the trash later.

This module is the driver and the entry points (``run_gc``, ``GcJob``).  What
runs in Spark tasks is ``lakemount.jobs.gc_tasks``, how object names are
spread over tasks is ``lakemount.jobs.gc_buckets``.  Driver and tasks reach
the namespace's objects only through ``Catalog.gc_store`` (``lakemount.catalog.gcstore``:
listing what may be collected and the trash, GC's own files, and the moves in
and out of the trash, ``lakemount.block.gcmoves``).

**Mark** (``GcJob.mark``): write a marker object and take *its* modification
time from the store as the mark start ``T`` (no clock skew between this host
and the store).  Choose the commits the rules retain at ``T`` (``retention``),
read their metaranges on executors, then read every distinct range and every
staging token of every branch on executors, turning each record into the key
of the data object it references.  Keys are shuffled into ``P`` buckets by the
first two hex digits of their name; the task of bucket ``b``
(``gc_tasks.mark_task``) lists the objects of its prefixes itself and keeps
as *candidates* those that nothing references and that were last modified
before ``cutoff = T - min_age - 1 s``, and lists its part of the trash with,
for each trashed object, whether something references it.  Each task writes
its candidates and its trash to the mark's part files; the driver writes the
summary (retained commits, referenced tables, rules, ``T``) to ``mark.json``
last.  Neither the driver nor any single task ever holds the repository's
entries: the driver sees commits, metarange and range ids only.

**Sweep** (``GcJob.sweep``): refs may have moved since the mark (new commits,
new tags, new branches, commits that consumed a staging token before the mark
read it, writers that re-staged existing bytes).  So the sweep marks again,
incrementally: commits retained now (still relative to ``T``) that the mark
did not retain, ranges the mark did not read, and every staging token of
every branch; then, once more, commits that appeared meanwhile.  Then each
bucket task (``gc_tasks.sweep_bucket``, whose docstring has the rules)
*restores* every trashed object the mark or the re-mark found referenced,
*purges* every trashed object neither found referenced that an earlier run
trashed before ``cutoff``, and *trashes* every candidate the re-mark did not
find referenced and that is, read again, still older than ``cutoff``.

What each did goes to ``marks/<id>/sweeps/<sweep id>/{trashed,restored,purged}/``.

**Observer.**  ``GcJob``/``run_gc`` take an optional ``observer(event, mark_id)``,
called synchronously on the driver at the boundaries of the phases
(``GC_EVENTS``): ``mark:start`` once ``T`` is taken, ``mark:end`` once
``mark.json`` is written, ``sweep:start`` before the re-mark reads the refs,
``sweep:moves`` when the re-mark is done and the buckets start restoring,
purging and trashing, ``sweep:end`` once the sweep's report is written.  It is
for progress reporting and for tests that must show that something happened
*inside* a phase (e.g. writers overlapping the mark and the sweep); an
exception it raises aborts the run.
Every move re-checks the store and tolerates a missing object, so an
interrupted sweep is simply run again.  Every run ends by deleting the
files of all but the ``KEEP_MARKS`` newest marks.

**Why a trash.**  Readers fall back to it (``TrashFallbackAdapter``, wired
in ``App`` under the catalog, the committed store, the mount and
the gateway), so an object trashed while something came to reference it
still reads, and the next run puts it back.  That closes the two holes of a
lock-free offline GC that deletes at once:

- on S3 a sweep reads an object's time, then moves it; a writer's ``touch``
  landing in between (general-purpose buckets have no conditional delete)
  used to lose the bytes its entry points at.  Now they are in the trash:
  readable, and restored by the next run.  (Locally the move is a rename
  and the time is read after it: no window at all.)
- an entry staged *after* the last re-mark that points at bytes written long
  ago without touching them (a metadata-only copy, or a writer whose adapter
  has no ``touch``) used to be missed.  Now the next run sees it and
  restores the bytes before anything can purge them.

The assumption left, and its bound: whatever stages an entry pointing at
existing bytes does so soon after it saw them alive, by touching them or by
reading an entry that references them from a retained commit or staging.
"Soon" is at least ``min_age``: a purge needs the object trashed before the
purging run's cutoff and unreferenced at that run's mark and re-mark, so the
sight and the staging would have to straddle a whole run-to-run interval.
The one case outside it is a copy of an entry read from a commit the rules
have already expired (its tables are in the trash too), staged after the
re-mark of the run that purges both: reading history the rules gave up is,
as in lakeFS, at one's own risk.

**Uploads not linked yet.**  An address the API handed out for a direct
upload (``getPhysicalAddress``, ``lakemount.catalog.uploads``) is
``data/<aa>/<64 hex>`` like any data object, and nothing references it until
the client links it.  The API writes a marker ``_lakefs/links/<name>.<deadline>``
when it hands the address out; the mark counts every object whose marker's
deadline is not more than ``LINK_CLOCK_SLACK`` before ``T`` as referenced (so
any link that still succeeds happened before the mark read staging), and
deletes the markers older than that.  An upload never linked is garbage from
then on, collected like any other.

**Small repositories.**  A namespace of at most ``SMALL_OBJECTS`` data objects
and tables (its GC marks, audit partitions, journal and commits are not counted)
is collected in this process (``inprocess.py``): the same steps and the same
tasks, without the seconds a Spark context takes to start.

GC only ever moves or deletes ``<ns>/data/<aa>/<sha256>``, ``<ns>/_lakefs/<64 hex>``,
their copies in ``<ns>/_lakefs/gc/trash/``, the files of its own old
marks and expired upload markers; commit objects, the journal, the rules, imported objects (absolute
URLs) and anything it does not recognise are never candidates.
"""

from __future__ import annotations

import contextlib
import json
import secrets
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import partial
from typing import TYPE_CHECKING, Any, Final

from lakemount.app import App
from lakemount.catalog.gcstore import MARKS_KEY
from lakemount.catalog.model import EMPTY_METARANGE, Commit, CommitID, Repository, StagingToken
from lakemount.errors import InvalidArgument, NotFound, ObjectNotFound, PreconditionFailed
from lakemount.jobs.gc_buckets import by_bucket, identity
from lakemount.jobs.gc_tasks import SAMPLE, live_keys, mark_task, read_metaranges, sweep_task
from lakemount.jobs.inprocess import JobContext, job_context
from lakemount.jobs.retention import GcRules, retained_commits
from lakemount.jobs.session import (
    Progress,
    check_interrupted,
    interruptible,
    parallelism,
    timed,
    translated,
)

if TYPE_CHECKING:
    from pyspark import RDD

DEFAULT_MIN_AGE: Final = 600.0
# Clock skew allowed between API hosts (which check link deadlines) and the block store (whose clock gives T).
LINK_CLOCK_SLACK: Final = 300.0
DEFAULT_BUCKETS: Final = 16
CLOCK_GRANULARITY: Final = 1.0  # S3 reports LastModified in whole seconds
KEEP_MARKS: Final = 10
# Up to this many objects in the namespace (data, tables, marks, trash) a run is in-process: its ranges
# and listings are a few thousand records, read faster than Spark starts.
SMALL_OBJECTS: Final = 1000
# Keys of any kind the size check lists at most (ten kept marks are ~840, audit partitions one per flush).
SMALL_LOOK: Final = 20 * SMALL_OBJECTS
MARK_VERSION: Final = 2  # 2: the mark lists the trash
GC_EVENTS: Final = ("mark:start", "mark:end", "sweep:start", "sweep:moves", "sweep:end")  # in order; see Observer

Observer = Callable[[str, str], None]
"""``observer(event, mark_id)``: told of each of ``GC_EVENTS`` as the driver reaches it."""


# ---------------------------------------------------------------------------- refs
@dataclass(frozen=True)
class RefState:
    """Branches (head, tokens) and tags of a repository at one moment."""

    heads: dict[str, CommitID]
    tokens: dict[str, tuple[StagingToken, ...]]
    tags: dict[str, CommitID]

    def all_tokens(self) -> list[StagingToken]:
        return sorted({t for ts in self.tokens.values() for t in ts})


def _read_refs(app: App, repo: str) -> RefState:
    branches = app.catalog.list_branches(repo)
    tags = app.catalog.list_tags(repo)
    return RefState(
        {b.name: b.commit_id for b in branches},
        {b.name: b.tokens for b in branches},
        {t.name: t.commit_id for t in tags},
    )


def all_commits(app: App, repo: str) -> dict[str, Commit]:
    """Every commit of ``repo``; read refs first, then this, so every head is here."""
    return {c.id: c for c in app.catalog.all_commits(repo)}


# ---------------------------------------------------------------------------- the job
def _iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, tz=UTC).isoformat(timespec="seconds")


def _new_id() -> str:
    return time.strftime("%Y%m%dT%H%M%SZ", time.gmtime()) + "-" + secrets.token_hex(3)


@dataclass
class Mark:
    """What a mark recorded (``mark.json``), enough for a sweep in another process."""

    id: str
    started: float
    cutoff: float
    min_age: float
    buckets: int
    rules: GcRules
    retained: set[str]
    dry_run: bool
    report: dict[str, Any] = field(default_factory=dict)


class GcJob:
    """GC of one repository on the process's Spark session.

    ``observer`` (optional) is called with each of ``GC_EVENTS`` and the mark
    id as the job reaches it (see the module's docstring).  Raises
    ``RepositoryNotFound`` for an unknown repository and
    ``PreconditionFailed`` when no rules are set.
    """

    def __init__(self, app: App, repo: str, *, master: str | None = None, buckets: int = DEFAULT_BUCKETS,
                 show_progress: bool | None = None, observer: Observer | None = None, engine: str = "auto") -> None:
        if not 1 <= buckets <= 256:
            raise InvalidArgument("buckets must be between 1 and 256")
        self.app = app
        self.repo: Repository = app.catalog.repository(repo)
        self.ns = self.repo.storage_namespace
        self.store = app.catalog.gc_store(self.ns)
        self.master = master
        self.engine = engine
        self.ran_on: str | None = None  # "spark" or "in-process" once the first job started
        self.buckets = buckets
        self.show_progress = show_progress
        self.observer = observer
        self.timings: dict[str, float] = {}
        self._sc: JobContext | None = None
        self._hit: threading.Event | None = None

    @property
    def sc(self) -> JobContext:
        if self._sc is None:
            start = time.monotonic()
            self._sc, self.ran_on = job_context(self.engine, self.master, self.is_small)
            self.timings["spark_start" if self.ran_on == "spark" else "size_check"] = round(time.monotonic() - start, 3)
        return self._sc

    def is_small(self) -> bool:
        """Whether the namespace holds at most ``SMALL_OBJECTS`` data objects and tables (GC's own marks and
        the audit partitions are not its work), found by listing at most ``SMALL_LOOK`` keys."""
        return self.store.holds_at_most(SMALL_OBJECTS, look=SMALL_LOOK)

    def _tell(self, event: str, mark_id: str) -> None:
        if self.observer is not None:
            self.observer(event, mark_id)

    @contextlib.contextmanager
    def _phase(self, left: str) -> Iterator[None]:
        """A mark or a sweep: Ctrl-C cancels its running Spark job, or stops it before the next, with ``Interrupted(left)``."""
        with interruptible(self.sc, left) as hit:
            self._hit = hit
            try:
                yield
            finally:
                self._hit = None

    def _job(self) -> contextlib.AbstractContextManager[None]:
        """Around each Spark job of a phase: none starts after a Ctrl-C, and executor errors come back translated."""
        check_interrupted(self._hit)
        return translated()

    def mark_dir(self, mark_id: str) -> str:
        """The key (relative to the namespace) under which the mark ``mark_id`` keeps its files."""
        return f"{MARKS_KEY}/{mark_id}"

    def rules(self) -> GcRules:
        rules = self.app.catalog.gc_rules(self.repo.name)
        if rules is None:
            raise PreconditionFailed(
                f"no GC rules for repository {self.repo.name}: set them with "
                f"`lakemount gc set-config lakefs://{self.repo.name} --default-retention-days N`"
            )
        return rules

    # -- shared steps -----------------------------------------------------------
    def _ranges_of(self, metaranges: Iterable[tuple[str, str]]) -> dict[str, str]:
        if not metaranges:
            return {}
        items = sorted(metaranges)
        n = min(len(items), parallelism(self.sc) * 2)
        fn = partial(read_metaranges, self.app.config, self.ns)
        with self._job():
            pairs = self.sc.parallelize(items, n).mapPartitions(fn).collect()
        return dict(pairs)

    def _live_rdd(self, items: list[tuple[str, ...]], counters: tuple[Any, Any, Any]) -> RDD[tuple[int, list[str]]]:
        """Records ``(bucket, names)`` of what ``items`` (ranges, staging tokens) reference (a Spark or in-process RDD)."""
        n = max(1, min(len(items), parallelism(self.sc) * 4))
        fn = partial(live_keys, self.app.config, self.ns, self.buckets, counters)
        return self.sc.parallelize(items, n).mapPartitions(fn)

    def linkable_uploads(self, started: float, *, dry_run: bool) -> set[str]:
        """Names of the data objects handed out for upload that may still be linked at ``started``.

        Deletes (unless ``dry_run``) the markers of those that no longer may.
        """
        names: set[str] = set()
        for name, deadline, marker in self.store.upload_markers():
            if deadline + LINK_CLOCK_SLACK >= started:
                names.add(name)
            elif not dry_run:
                self.store.drop_upload_marker(marker)
        return names

    def _counters(self) -> tuple[Any, Any, Any]:
        return self.sc.accumulator(0), self.sc.accumulator(0), self.sc.accumulator(0)

    # -- mark ---------------------------------------------------------------------
    def mark(self, *, min_age: float = DEFAULT_MIN_AGE, dry_run: bool = False, force: bool = False) -> Mark:
        """Mark, write the mark to the namespace, and return it (its report says what is garbage now).

        Refuses (``InvalidArgument``) rules that keep no history unless ``force``.
        """
        if min_age < 0:
            raise InvalidArgument("min-age must be >= 0 seconds")
        rules = self.rules()
        if not rules.keeps_history and not force:
            raise InvalidArgument(
                f"the GC rules of {self.repo.name} keep no history (0 days everywhere): everything but branch heads, "
                "tags and staging would be deleted; use --force"
            )
        sc = self.sc
        mark_id = _new_id()
        mdir = self.mark_dir(mark_id)
        left = (
            f"gc of {self.repo.name} interrupted during the mark: nothing was moved or deleted "
            f"(the incomplete mark {mark_id} is never swept); run it again"
        )
        with self._phase(left), timed(self.timings, "mark"):
            started_key = f"{mdir}/started"
            self.store.put(started_key, json.dumps({"repository": self.repo.name, "mark_id": mark_id}).encode())
            started = self.store.modified(started_key)
            cutoff = started - min_age - CLOCK_GRANULARITY
            self._tell("mark:start", mark_id)
            refs = _read_refs(self.app, self.repo.name)
            commits = all_commits(self.app, self.repo.name)
            retained = retained_commits(commits, refs.heads, refs.tags.values(), rules, started)
            metaranges = {
                (commits[c].metarange_id, commits[c].metarange_checksum)
                for c in retained
                if commits[c].metarange_id != EMPTY_METARANGE
            }
            with timed(self.timings, "mark_metaranges"):
                ranges = self._ranges_of(metaranges)
            live_tables = set(ranges) | {m for m, _ in metaranges}
            tokens = refs.all_tokens()
            items: list[tuple[str, ...]] = [("range", r, c) for r, c in sorted(ranges.items())]
            items += [("token", t) for t in tokens]
            counters = self._counters()
            linkable = self.linkable_uploads(started, dry_run=dry_run)
            pending = [(b, sorted(names)) for b, names in by_bucket(linkable, self.buckets).items()]
            tables = sc.broadcast(by_bucket(live_tables, self.buckets))
            fn = partial(mark_task, self.app.config, self.ns, self.buckets, cutoff, mdir, tables)
            try:
                with self._job(), Progress(sc, "gc mark", unit="task", enabled=self.show_progress), \
                        timed(self.timings, "mark_scan"):
                    live = self._live_rdd(items, counters)
                    if pending:  # an empty union still costs a task
                        live = live.union(sc.parallelize(pending, 1))
                    results = live.partitionBy(self.buckets, identity).mapPartitionsWithIndex(fn).collect()
            finally:
                _release(tables)
            stats: Counter[str] = Counter()
            sample: list[str] = []
            for r in results:
                stats.update(r["stats"])
                sample.extend(r["sample"])
            report = {
                "mark_id": mark_id,
                "mark_start": _iso(started),
                "cutoff": _iso(cutoff),
                "min_age_seconds": min_age,
                "rules": rules.to_json(),
                "commits": {"total": len(commits), "retained": len(retained), "expired": len(commits) - len(retained)},
                "branches": len(refs.heads),
                "tags": len(refs.tags),
                "staging_tokens": len(tokens),
                "scanned": {
                    "ranges": len(ranges),
                    "metaranges": len(metaranges),
                    "entries": counters[0].value,
                    "staged_entries": counters[1].value,
                    "imported_entries": counters[2].value,
                    "data_objects": stats["data_objects"],
                    "tables": stats["table_objects"],
                    "bytes": stats["bytes"],
                },
                "kept": {
                    "referenced": stats["referenced"],
                    "recent": stats["recent"],
                    "unrecognized": stats["unrecognized"],
                    "linkable_uploads": len(linkable),
                },
                "garbage": {
                    "data_objects": stats["garbage_data"],
                    "tables": stats["garbage_table"],
                    "bytes": stats["garbage_bytes"],
                    "sample": sorted(sample)[:SAMPLE],
                },
                "trash": {
                    "data_objects": stats["trash_data"],
                    "tables": stats["trash_table"],
                    "bytes": stats["trash_bytes"],
                    "referenced": stats["trash_referenced"],
                    "expired": stats["trash_expired"],
                },
            }
            self.store.put(f"{mdir}/ranges.txt", "".join(f"{t}\n" for t in sorted(live_tables)).encode())
            doc = {
                "version": MARK_VERSION,
                "mark_id": mark_id,
                "repository": self.repo.name,
                "storage_namespace": self.ns,
                "dry_run": dry_run,
                "started": started,
                "cutoff": cutoff,
                "min_age_seconds": min_age,
                "buckets": self.buckets,
                "rules": rules.to_json(),
                "retained": sorted(retained),
                "refs": {"heads": refs.heads, "tags": refs.tags, "tokens": {b: list(t) for b, t in refs.tokens.items()}},
                "report": report,
            }
            # Written last: a mark without mark.json is incomplete and cannot be swept.
            self.store.put(f"{mdir}/mark.json", json.dumps(doc, indent=1, sort_keys=True).encode())
        self._tell("mark:end", mark_id)
        return Mark(mark_id, started, cutoff, min_age, self.buckets, rules, set(retained), dry_run, report)

    def load_mark(self, mark_id: str) -> tuple[Mark, set[str]]:
        """A stored mark and the tables it found referenced; ``NotFound`` if there is no such (complete) mark."""
        if not mark_id or "/" in mark_id or mark_id.startswith("."):
            raise InvalidArgument(f"not a mark id: {mark_id!r}")
        mdir = self.mark_dir(mark_id)
        try:
            doc = json.loads(self.store.get(f"{mdir}/mark.json"))
            tables = set(self.store.get(f"{mdir}/ranges.txt").decode().split())
        except ObjectNotFound:
            raise NotFound(f"no complete GC mark {mark_id} in repository {self.repo.name}") from None
        if doc.get("storage_namespace") != self.ns or doc.get("repository") != self.repo.name:
            raise InvalidArgument(f"mark {mark_id} belongs to another repository")
        if doc.get("version") != MARK_VERSION:
            raise InvalidArgument(f"mark {mark_id} has format {doc.get('version')}, this lakemount sweeps {MARK_VERSION}: mark again")
        m = Mark(
            mark_id, float(doc["started"]), float(doc["cutoff"]), float(doc["min_age_seconds"]), int(doc["buckets"]),
            GcRules.from_json(doc["rules"]), set(doc["retained"]), bool(doc["dry_run"]), doc.get("report", {}),
        )
        return m, tables

    def prune_marks(self, keep: int = KEEP_MARKS) -> int:
        """Delete the files of all but the ``keep`` newest marks (ids sort by time); returns how many went."""
        root = f"{MARKS_KEY}/"
        by_mark: dict[str, list[str]] = {}
        for key in self.store.files(root):
            by_mark.setdefault(key[len(root) :].split("/", 1)[0], []).append(key)
        old = sorted(by_mark)[:-keep] if keep > 0 else sorted(by_mark)
        for mark_id in old:
            for key in by_mark[mark_id]:
                self.store.delete(key)
        return len(old)

    # -- sweep --------------------------------------------------------------------
    def sweep(self, mark_id: str, *, dry_run: bool = False) -> dict[str, Any]:
        """Re-mark what changed since the mark, then handle the trash and trash what is still garbage.

        With ``dry_run`` nothing moves; the report says what would have been
        trashed, restored and purged.
        """
        m, marked_tables = self.load_mark(mark_id)
        sc = self.sc
        mdir = self.mark_dir(mark_id)
        sweep_id = _new_id()
        sweep_dir = f"{mdir}/sweeps/{sweep_id}"
        known = set(m.retained)
        extra_tables: set[str] = set()
        scanned: set[str] = set()
        counters = self._counters()
        rdds: list[RDD[tuple[int, list[str]]]] = []
        if dry_run:
            left = f"gc dry run of {self.repo.name} interrupted during the sweep of mark {mark_id}: nothing was moved or deleted"
        else:
            left = (
                f"gc of {self.repo.name} interrupted during the sweep of mark {mark_id}: part of the garbage may be in "
                f"the trash already (reads still find it there); finish with: lakemount gc run lakefs://{self.repo.name} "
                f"--sweep {mark_id} (or run the whole gc again)"
            )
        try:
            with self._phase(left):
                self._tell("sweep:start", mark_id)
                with timed(self.timings, "remark"):
                    # Round 1: commits retained now that the mark did not read, and every
                    # staging token.  A token may be sealed, committed and dropped between
                    # reading the refs and scanning it (the scan finds it empty); its
                    # entries are then in a commit that round 2 sees as a new head.
                    # Tokens that appear after round 1's read hold only entries staged
                    # after the mark began: new bytes are younger than the cutoff, and
                    # re-used bytes were touched.  So two rounds suffice, however busy
                    # the repository is.
                    for round_no in (1, 2):
                        state = _read_refs(self.app, self.repo.name)
                        commits = all_commits(self.app, self.repo.name)
                        retained = retained_commits(commits, state.heads, state.tags.values(), m.rules, m.started)
                        new = retained - known
                        known |= new
                        metaranges = {
                            (commits[c].metarange_id, commits[c].metarange_checksum)
                            for c in new
                            if commits[c].metarange_id != EMPTY_METARANGE
                            and commits[c].metarange_id not in marked_tables
                            and commits[c].metarange_id not in extra_tables
                        }
                        ranges = {
                            r: c for r, c in self._ranges_of(metaranges).items() if r not in marked_tables and r not in extra_tables
                        }
                        extra_tables |= {mr for mr, _ in metaranges} | set(ranges)
                        tokens = state.all_tokens() if round_no == 1 else []
                        scanned.update(tokens)
                        items: list[tuple[str, ...]] = [("range", r, c) for r, c in sorted(ranges.items())]
                        items += [("token", t) for t in tokens]
                        if items:
                            rdd = self._live_rdd(items, counters).persist()
                            rdds.append(rdd)
                            with self._job():
                                rdd.count()
                self._tell("sweep:moves", mark_id)
                with timed(self.timings, "sweep"):
                    live = sc.union(rdds) if rdds else sc.parallelize([], 1)
                    tables = sc.broadcast(by_bucket(extra_tables, m.buckets))
                    fn = partial(sweep_task, self.app.config, self.ns, m.cutoff, mdir, sweep_dir, tables, dry_run)
                    try:
                        with self._job(), Progress(sc, "gc sweep", unit="task", enabled=self.show_progress):
                            results = live.partitionBy(m.buckets, identity).mapPartitionsWithIndex(fn).collect()
                    finally:
                        _release(tables)
        finally:
            for rdd in rdds:
                _release(rdd)
        stats: Counter[str] = Counter()
        samples: dict[str, list[str]] = {"trashed": [], "restored": [], "purged": []}
        for r in results:
            stats.update(r["stats"])
            for outcome, keys in r["samples"].items():
                samples[outcome].extend(keys)
        report = {
            "sweep_id": sweep_id,
            "rescanned": {
                "new_commits": len(known) - len(m.retained),
                "ranges": len(extra_tables),
                "staging_tokens": len(scanned),
                "entries": counters[0].value,
                "staged_entries": counters[1].value,
            },
            "kept": {
                "referenced_again": stats["referenced_again"],
                "touched": stats["touched"],
                "in_trash": stats["recent"],
            },
            "already_gone": stats["already_gone"],
            "already_gone_from_trash": stats["gone_from_trash"],
            **{
                outcome: {
                    "data_objects": stats[f"{outcome}_data"],
                    "tables": stats[f"{outcome}_table"],
                    "bytes": stats[f"{outcome}_bytes"],
                    "sample": sorted(keys)[:SAMPLE],
                }
                for outcome, keys in samples.items()
            },
        }
        self.store.put(
            f"{sweep_dir}/report.json",
            json.dumps({"dry_run": dry_run, "mark_id": mark_id, **report}, indent=1, sort_keys=True).encode(),
        )
        self._tell("sweep:end", mark_id)
        return report


def _release(resource: Any) -> None:
    """Drop a broadcast or unpersist an RDD; after a cancelled job this is best effort."""
    with contextlib.suppress(Exception):
        if hasattr(resource, "destroy"):
            resource.destroy()
        else:
            resource.unpersist()


def run_gc(
    app: App,
    repo: str,
    *,
    dry_run: bool = False,
    mark_only: bool = False,
    sweep: str | None = None,
    min_age: float = DEFAULT_MIN_AGE,
    master: str | None = None,
    buckets: int = DEFAULT_BUCKETS,
    show_progress: bool | None = None,
    force: bool = False,
    observer: Observer | None = None,
    engine: str = "auto",
) -> dict[str, Any]:
    """Run GC on ``repo`` and return its report.

    Modes: mark and sweep (default), ``mark_only`` (the report's ``garbage`` is
    what a sweep would consider), ``sweep=MARK_ID`` (sweep a stored mark).
    ``dry_run`` moves and deletes nothing; its ``trashed``, ``restored`` and
    ``purged`` sections list what a real sweep would do.  ``force`` accepts
    rules that keep no history.  ``observer`` is told of each phase boundary
    (``GC_EVENTS``, see ``GcJob``).  ``engine``: ``auto``, ``spark`` or
    ``in-process`` (``inprocess.job_context``); the report's ``engine`` says which ran.  Raises ``NotFound`` (repository, mark),
    ``PreconditionFailed`` (no rules), ``InvalidArgument``.
    """
    if mark_only and sweep:
        raise InvalidArgument("--mark-only and --sweep exclude each other")
    job = GcJob(app, repo, master=master, buckets=buckets, show_progress=show_progress, observer=observer, engine=engine)
    warnings: list[str] = []
    if not job.store.refreshes:
        warnings.append(
            "the block adapter has no touch(): bytes re-staged by dedup during this run are protected "
            "only by the re-mark before deletion"
        )
    started = time.monotonic()
    out: dict[str, Any] = {
        "repository": job.repo.name,
        "storage_namespace": job.ns,
        "mode": "sweep" if sweep else "mark-only" if mark_only else "run",
        "dry_run": dry_run,
    }
    if sweep:
        m, _tables = job.load_mark(sweep)
        out.update(m.report)
    else:
        m = job.mark(min_age=min_age, dry_run=dry_run, force=force)
        out.update(m.report)
    if not mark_only:
        swept = job.sweep(m.id, dry_run=dry_run)
        out.update({k: v for k, v in swept.items() if k != "kept"})
        out["kept"] = {**out.get("kept", {}), **swept["kept"]}
    job.prune_marks()
    if not mark_only and not dry_run:
        # The audit table's partitions past audit.retention_days (the writers expire them too, hourly).
        out["audit_files_expired"] = app.catalog.expire_audit(job.repo.name, app.config.audit.retention_days)
        # Staging files (staging.backend = lsm) no list references: orphans of killed writers, lists dropped.
        out["staging_files_collected"] = app.catalog.collect_staging(job.repo.name)
    out["engine"] = job.ran_on
    out["warnings"] = warnings
    out["timings"] = {**job.timings, "total": round(time.monotonic() - started, 3)}
    return out
