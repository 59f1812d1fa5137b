"""The one error tree of lakemount.

Every failure a user can see is a subclass of :class:`LakeMountError` in one of a
few categories.  Front ends translate categories (never individual classes) into
their own vocabulary at the edge: errno values in ``fuse/``, S3 error codes in
``gateway/``, exit status and a one-line message in ``cli/``.
"""

from __future__ import annotations


class LakeMountError(Exception):
    """Base of every error lakemount raises on purpose."""


class NotFound(LakeMountError):
    """A repository, ref, commit, object or key does not exist."""


class AlreadyExists(LakeMountError):
    """Creating something whose name is taken."""


class Conflict(LakeMountError):
    """Concurrent change or a merge conflict; the operation changed nothing."""


class PreconditionFailed(LakeMountError):
    """A condition the caller stated (CAS, If-Match, non-empty) does not hold."""


class InvalidArgument(LakeMountError):
    """Bad input: names, ref expressions, options."""


class ReadOnly(LakeMountError):
    """A write to something immutable (a tag, a commit, a committed or staged-only view)."""


class PermissionDenied(LakeMountError):
    """A rule of the repository refuses the operation: branch protection, a pre-hook."""


class Corrupt(LakeMountError):
    """Stored data failed its checksum or cannot be decoded."""


class Unavailable(LakeMountError):
    """A store cannot be reached or timed out."""


# --- specific errors -----------------------------------------------------------


class WouldWait(Unavailable):
    """A write made while its thread refuses to wait (:mod:`lakemount.waiting`) met what it would have waited for:
    a lock held elsewhere, a transaction of the same branch in flight, company to gather.  Nothing of it applied;
    the caller runs it again where it may wait (the mount's request loop hands the close to a thread)."""


class RepositoryNotFound(NotFound):
    """No repository named ``repo``."""

    def __init__(self, repo: str) -> None:
        super().__init__(f"repository not found: {repo}")
        self.repo = repo


class BranchNotFound(NotFound):
    """No branch ``branch`` in repository ``repo``."""

    def __init__(self, repo: str, branch: str) -> None:
        super().__init__(f"branch not found: {repo}/{branch}")
        self.repo, self.branch = repo, branch


class RefNotFound(NotFound):
    """``ref`` names no branch, tag or commit in ``repo``."""

    def __init__(self, repo: str, ref: str) -> None:
        super().__init__(f"ref not found: {repo}/{ref}")
        self.repo, self.ref = repo, ref


class CommitNotFound(NotFound):
    """No commit ``commit_id`` in ``repo``."""

    def __init__(self, repo: str, commit_id: str) -> None:
        super().__init__(f"commit not found: {repo}@{commit_id}")
        self.repo, self.commit_id = repo, commit_id


class ObjectNotFound(NotFound):
    """No object at ``what`` (a path, key or physical address)."""

    def __init__(self, what: str) -> None:
        super().__init__(f"object not found: {what}")
        self.what = what


class UploadNotFound(NotFound):
    """A multipart upload that does not exist, or was completed or aborted."""

    def __init__(self, upload_id: str) -> None:
        super().__init__(f"multipart upload not found: {upload_id}")
        self.upload_id = upload_id


class AmbiguousRef(InvalidArgument):
    """A short commit id or ref that matches more than one commit (``candidates``)."""

    def __init__(self, repo: str, ref: str, candidates: list[str]) -> None:
        shown = ", ".join(candidates[:5])
        super().__init__(f"ambiguous ref {ref!r} in {repo}: matches {shown}")
        self.repo, self.ref, self.candidates = repo, ref, candidates


class MetadataTooLarge(InvalidArgument):
    """User metadata over the size an object may carry (``size`` bytes of names and values, ``limit`` allowed)."""

    def __init__(self, size: int, limit: int) -> None:
        super().__init__(f"user metadata larger than {limit} bytes ({size} bytes of names and values)")
        self.size, self.limit = size, limit


class InvalidName(InvalidArgument):
    """A repository, branch or tag name that breaks lakemount's naming rules; ``reason`` says which."""

    def __init__(self, kind: str, name: str, reason: str) -> None:
        super().__init__(f"invalid {kind} name {name!r}: {reason}")
        self.kind, self.name, self.reason = kind, name, reason


class NotUtf8Text(InvalidArgument):
    """Text a verb takes (a commit message, metadata, a control file's command) that is not UTF-8.

    ``what`` names the verb; the message is the same from every front end (the mount's control
    files, the CLI's arguments, the API), because the catalog raises it for all of them.
    """

    def __init__(self, what: str) -> None:
        super().__init__(f"{what}: input is not UTF-8 text")
        self.what = what


class InvalidLinkAddress(InvalidArgument):
    """An address given to link that lakemount did not hand out for this repository, branch and path, or whose time ran out.

    ``reason`` says which (not signed, bad signature, expired, outside the storage namespace).
    """

    def __init__(self, address: str, reason: str) -> None:
        super().__init__(f"link address invalid: {reason}: {address[:300]!r}")
        self.address, self.reason = address, reason


class OutsideRoots(InvalidArgument):
    """A local location (an import source, a storage namespace) outside the directories the configuration
    key ``key`` allows; ``shown`` is the location as the user gave it (never where it resolved to)."""

    def __init__(self, what: str, shown: str, key: str) -> None:
        super().__init__(f"{what} {shown} is outside the directories {key} allows")
        self.what, self.shown, self.key = what, shown, key


class ConfigError(InvalidArgument):
    """A configuration that cannot be used: an unknown key, a wrong type, an unreadable file.

    ``key`` is the dotted key (or variable name) at fault, ``source`` where it came from
    (a file path or an environment variable name); the message is one line.
    """

    def __init__(self, message: str, key: str = "", source: str = "") -> None:
        super().__init__(f"config: {message}")
        self.key, self.source = key, source


class DirtyBranch(PreconditionFailed):
    """A merge, revert or cherry-pick into a branch whose uncommitted changes it would mix with."""

    def __init__(self, what: str, branch: str) -> None:
        # ``refused`` is the message without its hint, for a front end that says how in its own syntax.
        self.refused = f"uncommitted changes (dirty branch): {what} into {branch}"
        super().__init__(f"{self.refused}; commit or reset them first")
        self.branch = branch


class ObjectExists(PreconditionFailed):
    """A put-if-absent (``If-None-Match: *``) of a path that already has an object."""

    def __init__(self, what: str) -> None:
        super().__init__(f"object exists: {what} (If-None-Match: *)")
        self.what = what


class NothingToCommit(PreconditionFailed):
    """Nothing is staged on ``branch``, and an empty commit was not allowed."""

    def __init__(self, branch: str, detail: str | None = None, hint: str = "use --allow-empty") -> None:
        # lakeFS's wording first ("no changes"), so scripts that match on it keep working.  ``what`` is the
        # message without the CLI's ``hint``, for a front end that says how to allow it in its own syntax.
        self.what = detail or f"nothing to commit on branch {branch}"
        super().__init__(f"no changes: {self.what} ({hint})")
        self.branch = branch


class NothingToMerge(NothingToCommit):
    """A merge whose source brings nothing to ``branch``, and an empty merge commit was not allowed."""

    def __init__(self, source: str, branch: str) -> None:
        super().__init__(branch, f"{source} brings nothing to merge into {branch}", hint="use allow_empty")
        self.source = source


class MergeConflict(Conflict):
    """A merge that found conflicting changes on ``paths`` under the ``fail`` strategy; ``tables`` and ``views``
    are the Iceberg tables and views among them (``<namespace>.<name>``), which both sides changed."""

    def __init__(self, paths: list[str], tables: list[str] | None = None, views: list[str] | None = None) -> None:
        shown = ", ".join(paths[:20]) + (f" (+{len(paths) - 20} more)" if len(paths) > 20 else "")
        self.tables = list(tables or [])
        self.views = list(views or [])
        named = []
        for word, names in (("table", self.tables), ("view", self.views)):
            if names:
                listed = ", ".join(names[:20]) + (f" (+{len(names) - 20} more)" if len(names) > 20 else "")
                named.append(f"{word if len(names) == 1 else word + 's'} {listed}")
        both = f"{' and '.join(named)} changed on both branches; " if named else ""
        super().__init__(f"conflict found: {both}merge conflict on {len(paths)} path(s): {shown}")
        self.paths = paths


class TooManyComments(InvalidArgument):
    """A pull request that already holds the most comments it may (``pulls.max_comments``)."""

    def __init__(self, pull_id: str, most: int) -> None:
        super().__init__(f"pull request {pull_id} has {most} comments, the most pulls.max_comments allows")
        self.pull_id, self.most = pull_id, most


class TooManyActionFiles(InvalidArgument):
    """A ref holding more action files than an event reads (``actions.max_files``)."""

    def __init__(self, ref: str, most: int) -> None:
        super().__init__(f"more than {most} action files at {ref} (actions.max_files): none of them run")
        self.ref, self.most = ref, most


class ConcurrentUpdate(Conflict):
    """A compare-and-swap lost too many times in a row."""


class ProtectedBranch(PermissionDenied):
    """A direct write, commit, reset, cherry-pick or deletion on a branch a protection rule covers."""

    def __init__(self, repo: str, branch: str, action: str = "write", pattern: str = "") -> None:
        rule = f" (rule {pattern!r})" if pattern else ""
        self.refused = f"branch {repo}/{branch} is protected{rule}: {action} refused"  # without the hint, as DirtyBranch's
        super().__init__(f"{self.refused}, change it through a merge")
        self.repo, self.branch, self.action, self.pattern = repo, branch, action, pattern


class HookFailed(PermissionDenied):
    """A pre-hook (lakeFS action) rejected the operation; ``run_id`` names the recorded run."""

    def __init__(self, event: str, action: str, hook: str, reason: str, run_id: str = "") -> None:
        super().__init__(f"{event} rejected by hook {action}/{hook}: {reason}" + (f" (run {run_id})" if run_id else ""))
        self.event, self.action, self.hook, self.reason, self.run_id = event, action, hook, reason, run_id


class ReadOnlyRef(ReadOnly):
    """A write through a ref that is not a branch (a tag, a commit, ``branch@``)."""

    def __init__(self, ref: str) -> None:
        super().__init__(f"ref {ref} is read-only (not a branch)")
        self.ref = ref


class ChecksumMismatch(Corrupt):
    """Stored bytes whose checksum does not match what their parent recorded (``what`` is corrupt)."""

    def __init__(self, what: str) -> None:
        super().__init__(f"checksum mismatch: {what} is corrupt")
        self.what = what


class SourceChanged(Corrupt):
    """A zero-copy imported object whose source no longer holds what was imported."""

    def __init__(self, url: str, reason: str) -> None:
        super().__init__(
            f"imported object {url} changed at its source since the import ({reason}); "
            "its committed bytes are gone: restore the source or import it again"
        )
        self.url, self.reason = url, reason


class SchemaTooNew(Unavailable):
    """A ref store written by a newer lakemount (schema ``found`` > ``supported``): upgrade to use it."""

    def __init__(self, found: int, supported: int) -> None:
        super().__init__(
            f"ref store schema version {found} is newer than this lakemount supports ({supported}); upgrade lakemount"
        )
        self.found, self.supported = found, supported


CATEGORIES: tuple[type[LakeMountError], ...] = (
    NotFound,
    AlreadyExists,
    Conflict,
    PreconditionFailed,
    InvalidArgument,
    ReadOnly,
    PermissionDenied,
    Corrupt,
    Unavailable,
)


def category_of(err: LakeMountError) -> type[LakeMountError]:
    """Return the category an error belongs to (the class edges translate)."""
    for cat in CATEGORIES:
        if isinstance(err, cat):
            return cat
    return LakeMountError
