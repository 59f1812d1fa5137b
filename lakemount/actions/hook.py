"""What a hook type implements: a :data:`HookRunner` called with the hook, the event and a :class:`HookContext`.

A runner returns its output, or raises :class:`HookFailure` with the one-line
message the run records (and a failed pre-event reports).  Messages quote what
others wrote (a webhook's answer, a broken file's error) through
:func:`printable`, so they stay one line of text.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, BinaryIO, Final, Protocol

from lakemount.actions.events import Event
from lakemount.actions.parser import Hook
from lakemount.records import record

if TYPE_CHECKING:
    from lakemount.actions.network import WebhookPolicy
    from lakemount.graveler.model import Entry, Repository

MAX_MESSAGE: Final = 500


class HookFailure(Exception):
    """Raised by a hook implementation: the hook failed with this message."""


class Listing(Protocol):
    """One item of a listing as hooks read it: an object (``entry`` set) or a common prefix."""

    @property
    def path(self) -> str: ...

    @property
    def entry(self) -> Entry | None: ...

    @property
    def is_prefix(self) -> bool: ...


class HookCatalog(Protocol):
    """What hooks call of the catalog: objects read at a ref (the built-in checks), nothing that changes it.

    ``Catalog`` implements it; refs are names (``event.read_ref``, ``event.dest_ref``), never resolved ones.
    """

    def repository(self, name: str) -> Repository: ...

    def stat(self, repo: str, ref: str, path: str) -> Entry: ...

    def get_optional(self, repo: str, ref: str, path: str) -> Entry | None: ...

    def list(self, repo: str, ref: str, prefix: str = "", *, delimiter: str = "", after: str = "",
             limit: int | None = None) -> Iterator[Listing]: ...

    def open(self, repo: Repository, entry: Entry) -> BinaryIO: ...

    def read(self, repo: Repository, entry: Entry, offset: int = 0, length: int | None = None) -> bytes: ...


@record()
class HookContext:
    """Services hooks may use: the catalog (for data checks) and the addresses webhooks may reach
    (a :class:`~lakemount.actions.network.WebhookPolicy`; None: the default policy)."""

    catalog: HookCatalog
    make_webhooks: Callable[[], WebhookPolicy | None] | None = None

    @property
    def webhooks(self) -> WebhookPolicy | None:
        """The webhook policy, made when a webhook first asks: a commit without one never parses the networks
        (``ipaddress``, issue 41); raises what ``make_webhooks`` raises (``ConfigError`` for a bad setting)."""
        return self.make_webhooks() if self.make_webhooks is not None else None


HookRunner = Callable[[Hook, Event, dict[str, Any], HookContext], str]


def printable(data: bytes, limit: int = MAX_MESSAGE) -> str:
    """The start of a response body as one line of text: undecodable bytes and control characters removed."""
    text = data[: limit * 4].decode("utf-8", "replace")
    text = "".join(c if c.isprintable() else " " for c in text)
    text = " ".join(text.split())
    return text[:limit] + ("..." if len(text) > limit else "")
