"""Pull requests: a proposal to merge a source branch into a destination, with comments and approvals.

Shaped like lakeFS's ``/repositories/{repo}/pulls`` records (``id``,
``status`` open/closed/merged, ``title``, ``description``, ``source_branch``,
``destination_branch``, ``author``, ``creation_date``, ``closed_date``,
``merged_commit_id``).  Comments and approvals are lakemount's extension.  A
pull request merges only while open and once it has the approvals the
destination's protection rule requires (approvals by anyone but its author);
the merge itself is :meth:`Catalog.merge`, so pre-merge hooks run and a
conflict lists its paths.  Records live in a :class:`PullStore` (the ref
store's database).
"""

from __future__ import annotations

import fnmatch
import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Final, Protocol

from lakemount.config import PullsConfig
from lakemount.errors import ConcurrentUpdate, InvalidArgument, PreconditionFailed

if TYPE_CHECKING:
    from lakemount.catalog.events import Feed
    from lakemount.graveler.graveler import MergeResult
    from lakemount.graveler.model import Branch, Repository

OPEN: Final = "open"
CLOSED: Final = "closed"
MERGED: Final = "merged"
STATUSES: Final = (OPEN, CLOSED, MERGED)
MAX_TITLE: Final = 1000
MAX_TEXT: Final = 64 * 1024
MAX_COMMENTS: Final = PullsConfig().max_comments  # unless configured (pulls.max_comments)
EDIT_ATTEMPTS: Final = 5  # re-reads when a status change lands between an edit's read and its write


@dataclass(frozen=True, slots=True)
class PullRequest:
    """One pull request (lakeFS's field names)."""

    id: str
    repo: str
    status: str
    title: str
    description: str
    source_branch: str
    destination_branch: str
    author: str
    creation_date: float
    closed_date: float | None = None
    merged_commit_id: str | None = None


@dataclass(frozen=True, slots=True)
class Comment:
    """A comment on a pull request; ``id`` counts from 1 within the pull request."""

    id: int
    pull_id: str
    author: str
    body: str
    creation_date: float


@dataclass(frozen=True, slots=True)
class Approval:
    """One user's approval of a pull request (one per user)."""

    pull_id: str
    user: str
    creation_date: float


class PullStore(Protocol):
    """Where pull requests, comments, approvals and approval rules live (``lakemount.metastore.pulls.SqlPullStore``)."""

    def create(self, pr: PullRequest) -> PullRequest: ...  # assigns the id
    def get(self, repo: str, pull_id: str) -> PullRequest: ...  # NotFound
    def update(self, pr: PullRequest, *, expect: Collection[str]) -> None: ...  # NotFound; PreconditionFailed unless status in expect
    def list_pulls(self, repo: str, status: str | None, after: str, limit: int) -> list[PullRequest]: ...
    def add_comment(self, repo: str, comment: Comment, most: int) -> Comment: ...  # assigns the id; TooManyComments past most
    def comments(self, repo: str, pull_id: str, after: int, limit: int) -> list[Comment]: ...  # ids over after, by id
    def approve(self, repo: str, approval: Approval) -> None: ...  # idempotent per user
    def approvals(self, repo: str, pull_id: str) -> list[Approval]: ...
    def required_approvals(self, repo: str) -> dict[str, int]: ...  # pattern -> count
    def set_required_approvals(self, repo: str, pattern: str, count: int) -> None: ...  # 0 removes


def _text(value: str, what: str, limit: int, *, required: bool) -> str:
    value = value.strip() if required else value
    if required and not value:
        raise InvalidArgument(f"a pull request needs a {what}")
    if len(value) > limit:
        raise InvalidArgument(f"{what} longer than {limit} characters")
    return value


class PullsCatalog(Protocol):
    """What pull requests use of the catalog: the branches they name, its merge (hooks and protection with it) and
    its event feed (``Catalog``)."""

    @property
    def feed(self) -> Feed: ...

    def repository(self, name: str) -> Repository: ...

    def get_branch(self, repo: str, name: str) -> Branch: ...

    def merge(self, repo: str, source: str, dest: str, *, strategy: str | None = None, squash: bool = False,
              message: str | None = None, committer: str = "lakemount", metadata: Sequence[tuple[str, str]] = (),
              guard: Callable[[], None] | None = None, allow_empty: bool = False) -> MergeResult: ...


class Pulls:
    """Pull requests of repositories, over a store and the catalog's merge."""

    def __init__(self, store: PullStore, catalog: PullsCatalog, clock: Callable[[], float] = time.time,
                 max_comments: int = MAX_COMMENTS) -> None:
        self.store = store
        self.catalog = catalog
        self.clock = clock
        self.max_comments = max_comments

    def create(self, repo: str, source: str, destination: str, title: str, description: str = "", *, author: str) -> PullRequest:
        """Open a pull request; raises ``BranchNotFound``, ``InvalidArgument`` (same branch, empty title)."""
        self.catalog.get_branch(repo, source)
        self.catalog.get_branch(repo, destination)
        if source == destination:
            raise InvalidArgument("source and destination branches must differ")
        pr = PullRequest("", repo, OPEN, _text(title, "title", MAX_TITLE, required=True),
                         _text(description, "description", MAX_TEXT, required=False), source, destination,
                         author, self.clock())
        pr = self.store.create(pr)
        self._emit(pr, "opened", author)
        return pr

    def _emit(self, pr: PullRequest, action: str, user: str, kind: str = "pull-request", **extra: object) -> None:
        self.catalog.feed.emit(pr.repo, pr.destination_branch, kind, id=pr.id, action=action, user=user,
                               title=pr.title, source_branch=pr.source_branch, **extra)

    def get(self, repo: str, pull_id: str) -> PullRequest:
        """Raises ``NotFound``."""
        self.catalog.repository(repo)
        return self.store.get(repo, pull_id)

    def list_pulls(self, repo: str, status: str | None = OPEN, after: str = "", limit: int = 100) -> list[PullRequest]:
        """Pull requests by id (``status`` None: all); raises ``InvalidArgument`` for an unknown status."""
        if status is not None and status not in STATUSES:
            raise InvalidArgument(f"status must be one of {', '.join(STATUSES)} or all")
        self.catalog.repository(repo)
        return self.store.list_pulls(repo, status, after, limit)

    def edit(self, repo: str, pull_id: str, *, title: str | None = None, description: str | None = None) -> PullRequest:
        """Change title or description; raises ``NotFound``, ``InvalidArgument``.

        The change is stored only over the status it was made from, and made again from a fresh read if a
        merge, close or reopen came in between (a stale status must not reopen a merged pull request).
        """
        if title is not None:
            title = _text(title, "title", MAX_TITLE, required=True)
        if description is not None:
            description = _text(description, "description", MAX_TEXT, required=False)
        for _ in range(EDIT_ATTEMPTS):
            pr = self.get(repo, pull_id)
            pr = replace(pr, title=pr.title if title is None else title,
                         description=pr.description if description is None else description)
            try:
                self.store.update(pr, expect=(pr.status,))
                return pr
            except PreconditionFailed:
                continue
        raise ConcurrentUpdate(f"pull request {pull_id} kept changing while it was edited")

    def comment(self, repo: str, pull_id: str, body: str, *, author: str) -> Comment:
        """Add a comment (any status); raises ``NotFound``, ``InvalidArgument`` (empty, too long, or the pull
        request already has ``max_comments``: ``TooManyComments``)."""
        pr = self.get(repo, pull_id)
        c = self.store.add_comment(repo, Comment(0, pull_id, author, _text(body, "comment", MAX_TEXT, required=True), self.clock()),
                                   self.max_comments)
        self._emit(pr, "commented", author, "pull-request-comment", comment_id=c.id)
        return c

    def comments(self, repo: str, pull_id: str, after: int = 0, limit: int = 1000) -> Sequence[Comment]:
        """At most ``limit`` comments with ids over ``after``, oldest first (a page: a pull request may
        hold ``max_comments`` of up to ``MAX_TEXT`` each); raises ``NotFound``."""
        self.get(repo, pull_id)
        return self.store.comments(repo, pull_id, after, limit)

    def approve(self, repo: str, pull_id: str, *, user: str) -> list[Approval]:
        """Approve an open pull request; raises ``PreconditionFailed`` (not open, own pull request)."""
        pr = self.get(repo, pull_id)
        if pr.status != OPEN:
            raise PreconditionFailed(f"pull request {pull_id} is {pr.status}")
        if user == pr.author:
            raise PreconditionFailed("authors cannot approve their own pull request")
        self.store.approve(repo, Approval(pull_id, user, self.clock()))
        self._emit(pr, "approved", user, "pull-request-approval")
        return self.store.approvals(repo, pull_id)

    def approvals(self, repo: str, pull_id: str) -> list[Approval]:
        self.get(repo, pull_id)
        return self.store.approvals(repo, pull_id)

    def required(self, repo: str, branch: str) -> int:
        """Approvals a pull request into ``branch`` needs: the largest count of the rules matching it."""
        rules = self.store.required_approvals(repo)
        return max((n for p, n in rules.items() if fnmatch.fnmatchcase(branch, p)), default=0)

    def set_required(self, repo: str, pattern: str, count: int) -> None:
        """Require ``count`` approvals for pull requests into branches matching ``pattern`` (0 removes)."""
        from lakemount.catalog.protection import validate_pattern

        self.catalog.repository(repo)
        if count < 0:
            raise InvalidArgument("required approvals cannot be negative")
        self.store.set_required_approvals(repo, validate_pattern(pattern), count)

    def merge(self, repo: str, pull_id: str, *, strategy: str | None = None, squash: bool = False,
              committer: str = "lakemount") -> tuple[PullRequest, MergeResult]:
        """Merge an open, sufficiently approved pull request into its destination.

        Raises ``PreconditionFailed`` (not open, too few approvals), what
        :meth:`Catalog.merge` raises (``MergeConflict`` listing the paths,
        ``HookFailed``); the pull request stays open on failure.  Status and
        approvals are checked before the pre-merge hooks and again after them,
        just before the merge, so a rule raised or a pull request closed while
        hooks ran stops it; what changes during the merge itself (computing the
        merged tree and moving the branch head) is not seen.
        """
        pr = self.get(repo, pull_id)

        def ready() -> None:
            now = self.store.get(repo, pull_id)
            if now.status != OPEN:
                raise PreconditionFailed(f"pull request {pull_id} is {now.status}")
            need = self.required(repo, pr.destination_branch)
            have = len([a for a in self.store.approvals(repo, pull_id) if a.user != pr.author])
            if have < need:
                raise PreconditionFailed(f"pull request {pull_id} has {have} of the {need} approvals {pr.destination_branch} requires")

        ready()
        res = self.catalog.merge(
            repo, pr.source_branch, pr.destination_branch, strategy=strategy, squash=squash,
            message=f"Merge pull request #{pr.id}: {pr.title}", committer=committer,
            metadata=[("lakemount.pull_request", pr.id)], guard=ready,
        )
        merged = replace(pr, status=MERGED, closed_date=self.clock(), merged_commit_id=res.commit_id)
        self.store.update(merged, expect=(OPEN, CLOSED))  # a close that raced the merge loses: it merged
        self._emit(merged, "merged", committer, commit_id=res.commit_id)
        return merged, res

    def close(self, repo: str, pull_id: str) -> PullRequest:
        """Close an open pull request; raises ``PreconditionFailed`` if it is not open."""
        pr = self.get(repo, pull_id)
        if pr.status != OPEN:
            raise PreconditionFailed(f"pull request {pull_id} is {pr.status}")
        pr = replace(pr, status=CLOSED, closed_date=self.clock())
        self.store.update(pr, expect=(OPEN,))
        self._emit(pr, "closed", "")
        return pr

    def reopen(self, repo: str, pull_id: str) -> PullRequest:
        """Reopen a closed pull request; raises ``PreconditionFailed`` (merged or open), ``BranchNotFound``."""
        pr = self.get(repo, pull_id)
        if pr.status != CLOSED:
            raise PreconditionFailed(f"pull request {pull_id} is {pr.status}: only closed ones reopen")
        self.catalog.get_branch(repo, pr.source_branch)
        self.catalog.get_branch(repo, pr.destination_branch)
        pr = replace(pr, status=OPEN, closed_date=None)
        self.store.update(pr, expect=(CLOSED,))
        self._emit(pr, "reopened", "")
        return pr
