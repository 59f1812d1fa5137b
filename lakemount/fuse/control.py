"""Control files: git verbs as files under ``.lakefs/`` in every branch root.

Writing runs the verb and returns only once it is done; reading shows a state:

========  ================================================  ==========================
file      write                                             read
========  ================================================  ==========================
commit    a message (or JSON ``{"message", "metadata",      the head commit (JSON)
          "allow_empty"}``) -> commit the branch
merge     ``SOURCE [--strategy fail|source-wins|dest-wins]  the last merge (JSON)
          [--squash] [-m MSG]`` -> merge into the branch
revert    ``REF [--parent-number N] [--allow-empty]`` ->     the last revert (JSON)
          revert that commit (REF may be
          ``lakefs://REPO/REF``; ``--parent N`` and ``-m N``
          are taken too)
reset     ``PATH`` (that object and that directory),        the last reset (JSON)
          ``--object PATH``, ``--prefix P``, or ``--all``
          for the whole branch (a blank write is EINVAL)
status                                                      uncommitted changes (JSON)
head                                                        the head commit id
log                                                         recent commits (JSON)
error                                                       the last failure's message
                                                            (also a write refused by a
                                                            protection rule)
stats     (mount-wide, at the mount root)                   Prometheus text
========  ================================================  ==========================

An option's value follows it or an ``=`` (``--strategy=source-wins``).
Read-only refs get ``head`` and ``log`` only.  A failing write raises the
errno a shell user reads right for its failure (``fuse/errno.py``'s
``CONTROL_ERRNO``: ENODATA for nothing to commit, ECANCELED for a merge
conflict, EBUSY for uncommitted changes in the way, EINVAL for bad input or
an unknown ref, EPERM for a protected branch or a pre-hook's rejection; a
command written to a tag's or commit's ``.lakefs`` is EROFS, as any write to
a read-only ref) and leaves its message, with
conflicting paths one per line, in ``error``, with how to go ahead in these
files' own syntax (what to write to which file), never the CLI's flags.  Each write call is one command: ``echo msg > .lakefs/commit``.
"""

from __future__ import annotations

import json
import pwd
import shlex
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from lakemount.catalog import shapes
from lakemount.catalog.catalog import Catalog
from lakemount.catalog.model import Commit
from lakemount.catalog.paths import printable_tree
from lakemount.errors import (
    DirtyBranch,
    InvalidArgument,
    LakeMountError,
    MergeConflict,
    NotFound,
    NothingToCommit,
    NotUtf8Text,
    ProtectedBranch,
)
from lakemount.fuse.errno import FsError, control_errno_of
from lakemount.fuse.listing import count_hidden
from lakemount.fuse.scope import Scope

CONTROL_DIR: Final = ".lakefs"
BRANCH_FILES: Final = ("commit", "merge", "revert", "reset", "status", "head", "log", "error")
READONLY_REF_FILES: Final = ("head", "log")
# Keys ``status`` examines for ones the mount hides (``hidden.complete`` is false past it).
HIDDEN_SCAN_LIMIT: Final = 100_000
# What a write to ``.lakefs/reset`` must say to drop every uncommitted change of the branch.
RESET_ALL: Final = "--all"
WRITABLE: Final = frozenset({"commit", "merge", "revert", "reset"})
STATS: Final = "stats"
LOG_LIMIT: Final = 100
STATUS_LIMIT: Final = 100_000
STRATEGIES: Final = ("fail", "source-wins", "dest-wins")
# A merge commit's parent to revert to: lakectl's --parent-number (documented), and the spellings this file took before.
PARENT_OPTIONS: Final = ("--parent-number", "--parent", "-m")
# How to write an empty commit or revert to a control file, for the message of one refused as empty.
ALLOW_EMPTY: Final = {"commit": '{"message": "MSG", "allow_empty": true}', "revert": "'REF --allow-empty'"}
# How to go ahead, in the control files' own syntax, after a refusal of these kinds (``.lakefs/error``).
DIRTY_HINT: Final = "commit them first (write a message to .lakefs/commit) or drop them (write --all to .lakefs/reset)"
CONFLICT_HINT: Final = ("to keep one side, write 'SOURCE --strategy source-wins' (or dest-wins) to .lakefs/merge; "
                        "or change one branch so they agree, commit it, and write SOURCE to .lakefs/merge again")
PROTECTED_HINT: Final = ("commit on another branch (its .lakefs/commit), then write that branch's name to this "
                         "branch's .lakefs/merge")


@dataclass(frozen=True, slots=True)
class Outcome:
    """What a control write did to the branch's content."""

    content_changed: bool  # merge, revert, reset: cached entries are stale
    head_moved: bool


def files_for(scope: Scope | None, with_stats: bool) -> tuple[str, ...]:
    """Names in a ``.lakefs`` directory: of a scope (None: the mount root's)."""
    names: tuple[str, ...] = ()
    if scope is not None:
        names = BRANCH_FILES if scope.writable else READONLY_REF_FILES
    return (*names, STATS) if with_stats else names


def committer_name(uid: int) -> str:
    """The login name of ``uid`` for commits made through the mount, or ``uid:N`` when it has none."""
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return f"uid:{uid}"


def _json(data: Any) -> bytes:
    return (json.dumps(printable_tree(data), indent=2, sort_keys=False, default=str) + "\n").encode()


def _commit_json(c: Commit) -> dict[str, Any]:
    """A commit as the CLI's --json and the REST API draw it (lakeFS's ``Commit``)."""
    return shapes.commit_json(c)


class ControlFiles:
    """Runs control-file commands against the catalog; stateless but for each scope's last results."""

    def __init__(self, catalog: Catalog, render_stats: Callable[[], str]) -> None:
        self.catalog = catalog
        self.render_stats = render_stats
        # The write-back pipeline's part of ``status`` (set by a mount that writes back).
        self.writeback_status: Callable[[str, str], dict[str, Any]] | None = None

    # ------------------------------------------------------------------ reads
    def read(self, scope: Scope | None, name: str) -> bytes:
        """The content of control file ``name`` now; raises what the catalog raises."""
        if name == STATS:
            return self.render_stats().encode()
        assert scope is not None
        catalog = self.catalog
        if name == "head":
            return (self._head(scope) + "\n").encode()
        if name == "commit":
            return _json(_commit_json(catalog.get_commit(scope.repo, self._head(scope))))
        if name in ("merge", "revert", "reset"):
            return _json(scope.last.get(name, {}))
        if name == "log":
            return _json([_commit_json(c) for c in catalog.log(scope.repo, self._ref(scope), limit=LOG_LIMIT)])
        if name == "status":
            return _json(self._status(scope))
        if name == "error":
            return scope.last_error.encode()
        raise InvalidArgument(f"unknown control file {name}")

    def _ref(self, scope: Scope) -> str:
        return scope.branch if scope.writable else scope.resolved.commit_id

    def _head(self, scope: Scope) -> str:
        if scope.writable:
            return self.catalog.get_branch(scope.repo, scope.branch).commit_id
        return scope.resolved.commit_id

    def _status(self, scope: Scope) -> dict[str, Any]:
        changes: list[dict[str, Any]] = []
        truncated = False
        for rec in self.catalog.diff_uncommitted(scope.repo, scope.branch):
            if len(changes) >= STATUS_LIMIT:
                truncated = True
                break
            item: dict[str, Any] = {"path": rec.path, "type": rec.kind}
            if rec.right is not None:
                item["size_bytes"] = rec.right.size
                item["checksum"] = rec.right.etag
            changes.append(item)
        count, examples, complete = count_hidden(self.catalog, scope.repo, scope.resolved, HIDDEN_SCAN_LIMIT, CONTROL_DIR)
        hidden = {"count": count, "examples": examples, "complete": complete}
        status = {
            "branch": scope.branch, "head": self._head(scope), "changes": changes, "truncated": truncated, "hidden": hidden,
        }
        if self.writeback_status is not None and scope.writable:
            status["writeback"] = self.writeback_status(scope.repo, scope.branch)
        return status

    # ------------------------------------------------------------------ writes
    def write(self, scope: Scope, name: str, data: bytes, uid: int) -> Outcome:
        """Run the command written to ``name``; raises a lakemount error (and records it) on failure."""
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            return self._fail(scope, name, NotUtf8Text(name))
        try:
            if name == "commit":
                return self._commit(scope, text, uid)
            if name == "merge":
                return self._merge(scope, text, uid)
            if name == "revert":
                return self._revert(scope, text, uid)
            if name == "reset":
                return self._reset(scope, text)
            raise InvalidArgument(f".lakefs/{name} is read-only")
        except LakeMountError as exc:
            return self._fail(scope, name, exc)

    def _check_ref(self, scope: Scope, ref: str, verb: str) -> None:
        """A ref that does not resolve is bad input to a control file: EINVAL, not ENOENT."""
        try:
            self.catalog.resolve(scope.repo, ref)
        except NotFound as exc:
            raise InvalidArgument(f"{verb}: {exc}") from None

    def _fail(self, scope: Scope, name: str, exc: LakeMountError) -> Outcome:
        """Keep ``exc`` in ``.lakefs/error`` and raise the errno a shell user reads right for it
        (``control_errno_of``); a hint on how to go ahead is in this file's syntax, not the CLI's."""
        message = ""
        if isinstance(exc, NothingToCommit):
            anyway = ALLOW_EMPTY.get(name)
            message = f"no changes: {exc.what}" + (f"; to {name} anyway, write {anyway}" if anyway else "")
        elif isinstance(exc, DirtyBranch):
            message = f"{exc.refused}; {DIRTY_HINT}"
        elif isinstance(exc, MergeConflict):
            message = f"{exc}; {CONFLICT_HINT}"
        elif isinstance(exc, ProtectedBranch):
            message = f"{exc.refused}; {PROTECTED_HINT}"
        scope.record_error(name, exc, ["conflicting paths:", *exc.paths] if isinstance(exc, MergeConflict) else (),
                           message)
        raise FsError(control_errno_of(exc), str(exc)) from exc

    def _commit(self, scope: Scope, text: str, uid: int) -> Outcome:
        message, metadata, allow_empty = text.strip(), [], False
        if message.startswith("{"):
            try:
                spec = json.loads(message)
            except json.JSONDecodeError as exc:
                raise InvalidArgument(f"commit: bad JSON: {exc}") from None
            if not isinstance(spec, dict) or not isinstance(spec.get("message", ""), str):
                raise InvalidArgument('commit: JSON must look like {"message": "...", "metadata": {...}}')
            message = spec.get("message", "").strip()
            meta = spec.get("metadata") or {}
            if not isinstance(meta, dict):
                raise InvalidArgument("commit: metadata must be an object")
            metadata = [(str(k), str(v)) for k, v in meta.items()]
            allow_empty = bool(spec.get("allow_empty", False))
        if not message:
            raise InvalidArgument("commit: write a commit message")
        res = self.catalog.commit(
            scope.repo, scope.branch, message, committer=committer_name(uid), metadata=metadata, allow_empty=allow_empty
        )
        scope.last["commit"] = _commit_json(res.commit)
        return Outcome(content_changed=False, head_moved=True)

    def _merge(self, scope: Scope, text: str, uid: int) -> Outcome:
        line = _parse(text, "merge", MERGE_OPTIONS, "SOURCE [--strategy X] [--squash] [-m MSG]", "source ref",
                      "write a source ref, e.g. 'dev' or 'dev --strategy source-wins'")
        source = line.operand
        strategy = line.values.get("--strategy", "fail")
        if strategy not in STRATEGIES:
            raise InvalidArgument(f"merge: --strategy must be one of {', '.join(STRATEGIES)}")
        squash = "--squash" in line.values
        message = line.values.get("-m")
        self._check_ref(scope, source, "merge")
        res = self.catalog.merge(
            scope.repo, source, scope.branch, strategy=None if strategy == "fail" else strategy, squash=squash,
            message=message, committer=committer_name(uid),
        )
        scope.last["merge"] = {"source": source, "reference": res.commit_id, "merged": res.merged, "changes": res.changes}
        return Outcome(content_changed=res.merged, head_moved=res.merged)

    def _revert(self, scope: Scope, text: str, uid: int) -> Outcome:
        line = _parse(text, "revert", REVERT_OPTIONS, "REF [--parent-number N] [--allow-empty]", "ref",
                      "write the commit to revert, e.g. 'main~1'")
        ref = line.operand
        number = line.values.get("--parent-number")
        if number is not None and not number.isdigit():
            raise InvalidArgument("revert: --parent-number needs a number")
        parent = None if number is None else int(number)
        allow_empty = "--allow-empty" in line.values
        if ref.startswith("lakefs://"):
            ref = _ref_of_uri(ref, scope.repo)
        self._check_ref(scope, ref, "revert")
        c = self.catalog.revert(
            scope.repo, scope.branch, ref, parent_number=parent, committer=committer_name(uid), allow_empty=allow_empty
        )
        scope.last["revert"] = {"reverted": ref, "reference": c.id, "commit": _commit_json(c)}
        return Outcome(content_changed=True, head_moved=True)

    def _reset(self, scope: Scope, text: str) -> Outcome:
        """``--all``: the whole branch; ``PATH``: that object and that directory (never a string
        prefix); ``--object PATH``: one key; ``--prefix P``: a string prefix.  Blank is EINVAL."""
        args = _split(text, "reset")
        cat = self.catalog
        if args == [RESET_ALL]:
            cat.reset(scope.repo, scope.branch)
            scope.last["reset"] = {"scope": "all"}
        elif len(args) == 2 and args[0] == "--object":
            cat.reset(scope.repo, scope.branch, path=args[1].lstrip("/"))
            scope.last["reset"] = {"scope": "object", "path": args[1]}
        elif len(args) == 2 and args[0] == "--prefix":
            cat.reset(scope.repo, scope.branch, prefix=args[1].lstrip("/"))
            scope.last["reset"] = {"scope": "prefix", "prefix": args[1]}
        elif len(args) == 1 and not args[0].startswith("-") and args[0].strip("/"):
            cat.reset_path(scope.repo, scope.branch, args[0])
            scope.last["reset"] = {"scope": "path", "path": args[0].strip("/")}
        else:
            raise InvalidArgument(
                f"reset: write a path (that object or directory), '--object PATH', '--prefix P', or '{RESET_ALL}' for the whole branch"
            )
        return Outcome(content_changed=True, head_moved=False)


def _ref_of_uri(text: str, repo: str) -> str:
    """The ref of ``lakefs://REPO/REF`` written into a control file; ``InvalidArgument`` for another repository."""
    rest = text[len("lakefs://") :].split("/")
    if len(rest) < 2 or not rest[1] or any(rest[2:]):
        raise InvalidArgument(f"expected a URI like lakefs://{repo}/REF, got {text!r}")
    if rest[0] != repo:
        raise InvalidArgument(f"{text} is in repository {rest[0]!r}, not {repo!r}")
    return rest[1]


@dataclass(frozen=True, slots=True)
class Option:
    """An option a control file's line may carry: its spellings (the first names it in messages) and,
    for one that takes a value (``--x V`` or ``--x=V``), what the value is (``a number``); a flag has none."""

    spellings: tuple[str, ...]
    value: str = ""


MERGE_OPTIONS: Final = (
    Option(("--strategy",), f"one of {', '.join(STRATEGIES)}"), Option(("--squash",)), Option(("-m", "--message"), "a message"),
)
REVERT_OPTIONS: Final = (Option(PARENT_OPTIONS, "a number"), Option(("--allow-empty",)))


@dataclass(frozen=True, slots=True)
class Line:
    """A parsed control line: its one operand and its options' values by first spelling ('' for a flag)."""

    operand: str
    values: dict[str, str]


def _parse(text: str, verb: str, options: tuple[Option, ...], usage: str, operand: str, missing: str) -> Line:
    """The line written to control file ``verb``: one ``operand`` and ``options``; raises ``InvalidArgument``
    (``verb: ...``) for an unknown option (naming ``usage``), an option without its value, a second
    operand, or none (``missing`` says what to write)."""
    by_spelling = {spelling: o for o in options for spelling in o.spellings}
    values: dict[str, str] = {}
    found: str | None = None
    it = iter(_split(text, verb))
    for a in it:
        name, eq, attached = a.partition("=")
        option = by_spelling.get(name if eq else a)
        if option is not None and (option.value or not eq):
            value = attached if eq else (next(it, None) if option.value else "")
            if value is None:
                raise InvalidArgument(f"{verb}: {option.spellings[0]} needs {option.value}")
            values[option.spellings[0]] = value
        elif a.startswith("-"):
            raise InvalidArgument(f"{verb}: unknown option {a} (use {usage})")
        elif found is None:
            found = a
        else:
            raise InvalidArgument(f"{verb}: one {operand} only")
    if found is None:
        raise InvalidArgument(f"{verb}: {missing}")
    return Line(found, values)


def _split(text: str, verb: str) -> list[str]:
    try:
        return shlex.split(text)
    except ValueError as exc:
        raise InvalidArgument(f"{verb}: {exc}") from None
