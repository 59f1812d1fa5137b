"""Shared pieces of the command line: ``lakefs://`` URIs, output, errors, progress.

Every verb imports this module, so it imports nothing heavy at load time: the
``App`` (and through it the stores) and tqdm are loaded when first used.
"""

from __future__ import annotations

import functools
import json
import os
import sys
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, TypeVar

import click

from lakemount.catalog.paths import printable_tree
from lakemount.errors import InvalidArgument
from lakemount.records import record

if TYPE_CHECKING:
    from tqdm import tqdm

    from lakemount.app import App
    from lakemount.catalog.model import Commit, Entry

F = TypeVar("F", bound=Callable[..., Any])


@record(frozen=True, slots=True)
class Uri:
    """``lakefs://repo[/ref[/path]]``."""

    repo: str
    ref: str | None = None
    path: str = ""

    def __str__(self) -> str:
        s = f"lakefs://{self.repo}"
        if self.ref:
            s += f"/{self.ref}"
            if self.path:
                s += f"/{self.path}"
        return s


def parse_uri(text: str, *, need_ref: bool = False, need_path: bool = False, path_hint: str | None = None) -> Uri:
    """Parse a ``lakefs://`` URI; raises ``InvalidArgument`` with the expected form.

    With ``path_hint`` (a verb that takes a ref, not an object) a path is refused,
    never silently ignored; the hint says what to use instead ("" for nothing).
    """
    form = "lakefs://repo" + ("/ref" if need_ref else "") + ("/path" if need_path else "")
    if not text.startswith("lakefs://"):
        raise InvalidArgument(f"expected a URI like {form}, got {text!r}")
    rest = text[len("lakefs://") :]
    parts = rest.split("/", 2)
    repo = parts[0]
    ref = parts[1] if len(parts) > 1 and parts[1] else None
    path = parts[2] if len(parts) > 2 else ""
    if not repo or (need_ref and not ref) or (need_path and not path):
        raise InvalidArgument(f"expected a URI like {form}, got {text!r}")
    if path_hint is not None and path:
        raise InvalidArgument(f"expected a URI like {form} without a path, got {text!r}" + (f"; {path_hint}" if path_hint else ""))
    return Uri(repo, ref, path)


def parse_repo_uri(text: str) -> Uri:
    """A repository's URI, ``lakefs://REPO``, for a verb that acts on the whole repository.

    A ref or a path is refused, never ignored: ``repo delete lakefs://r/main``
    deleted the repository of a user who meant the branch.
    """
    u = parse_uri(text)
    if u.ref or u.path:
        raise InvalidArgument(
            f"expected a repository URI like lakefs://{u.repo}, got {text!r}: this command acts on the whole repository"
        )
    return u


def parse_ref_uri(text: str, path_hint: str = "") -> tuple[str, str]:
    """``(repo, ref)`` of ``lakefs://REPO/REF``, for a verb on a ref: a path is refused (``path_hint`` says what to use instead)."""
    u = parse_uri(text, need_ref=True, path_hint=path_hint)
    assert u.ref
    return u.repo, u.ref


def ref_and_target(uri: str, target: str, elsewhere: str) -> tuple[str, str, str]:
    """``(repo, name, target ref)`` of a branch or tag to make, ``uri``, and the ref it will point at, ``target``;
    ``InvalidArgument(elsewhere)`` when they are in different repositories."""
    repo, name = parse_ref_uri(uri)
    target_repo, ref = parse_ref_uri(target)
    if target_repo != repo:
        raise InvalidArgument(elsewhere)
    return repo, name, ref


def emit_refs(refs: Iterable[Any], id_chars: int | None = None) -> None:
    """List branches or tags: lakeFS ``Ref`` records in JSON, ``name  commit`` lines in text (the commit id cut to ``id_chars``)."""
    from lakemount.catalog.shapes import ref_json

    found = list(refs)
    emit([ref_json(r.name, r.commit_id) for r in found], [f"{r.name:<40} {r.commit_id[:id_chars]}" for r in found])


def ref_of(text: str, repo: str) -> str:
    """The ref of ``lakefs://REPO/REF`` (lakectl's form), or ``text`` itself when it is a bare ref.

    ``InvalidArgument`` if the URI names another repository or carries a path.
    """
    if not text.startswith("lakefs://"):
        return text
    u = parse_uri(text, need_ref=True)
    assert u.ref
    if u.repo != repo:
        raise InvalidArgument(f"{text} is in repository {u.repo!r}, not {repo!r}")
    if u.path:
        raise InvalidArgument(f"expected a URI like lakefs://repo/ref without a path, got {text!r}")
    return u.ref


class Ctx:
    """Per-invocation state: the app (built lazily) and output mode."""

    def __init__(self, config_path: str | None, as_json: bool) -> None:
        self.config_path = config_path
        self.as_json = as_json
        self._app: App | None = None
        self._target: tuple[str, str, str, str] | None = None

    @property
    def app(self) -> App:
        """The app of ``--config`` (built on first use); raises ``ConfigError`` for a bad configuration."""
        if self._app is None:
            from lakemount.app import App

            app = self._app = App.from_config(self.config_path)
            from lakemount.audit.context import Actor, act_as
            from lakemount.audit.record import CLI

            # What this process does is done by the local account that runs it (no access key in local mode).
            act_as(Actor(local_user(), CLI))
            if app.audit is not None:
                # A verb's records go to a spool file, not to Parquet at its exit (no pyarrow, no store I/O);
                # serve and mount switch back to buffering (AuditLog.start).
                app.audit.spool(on_stale=lambda: drain_elsewhere(self.config_path, app.config.home))
        return self._app

    def acts_on(self, repo: str, op: str, ref: str = "", path: str = "") -> None:
        """What the running verb reads or changes: recorded with its status if the verb fails (:meth:`failed`).

        A success records itself: a data verb through :meth:`audit`, a versioning
        verb through the catalog (``op`` is then the catalog's name for it).
        """
        self._target = (repo, op, ref, path)

    def audit(self, repo: str, op: str, ref: str, path: str, *, nbytes: int = 0, commit: str = "", detail: str = "") -> None:
        """One audit record of a data verb that succeeded (versioning verbs are recorded by the catalog itself)."""
        self._target = None
        log = self.app.audit
        if log is not None:
            log.record(repo=repo, op=op, ref=ref, commit=commit, path=path, nbytes=nbytes, detail=detail)

    def failed(self, exc: BaseException) -> None:
        """Record the verb's target (:meth:`acts_on`) as failed, with the status the API would answer for ``exc``."""
        target, self._target = self._target, None
        if target is None or self._app is None or self._app.audit is None:
            return
        from lakemount.api.errors import status_of
        from lakemount.errors import LakeMountError

        repo, op, ref, path = target
        status = status_of(exc) if isinstance(exc, LakeMountError) else 500
        self._app.audit.record(repo=repo, op=op, ref=ref, path=path, status=status,
                               detail=json.dumps({"error": str(exc)[:500]}, ensure_ascii=False))


def drain_elsewhere(config_path: str | None, home: str) -> None:
    """Start ``lakemount audit flush`` detached (its own session; its messages in ``run/audit/flush.log``), as git
    starts ``gc --auto``: the verb that noticed a stuck spool does not wait for pyarrow and the store."""
    from lakemount.audit.log import run_dir

    argv = [sys.executable, "-m", "lakemount.cli.main", *(["--config", config_path] if config_path else []),
            "audit", "flush"]
    null = os.open(os.devnull, os.O_RDWR | os.O_CLOEXEC)
    out = os.open(os.path.join(run_dir(home), "flush.log"), os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        os.posix_spawn(sys.executable, argv, os.environ, setsid=True, file_actions=[
            (os.POSIX_SPAWN_DUP2, null, 0), (os.POSIX_SPAWN_DUP2, null, 1), (os.POSIX_SPAWN_DUP2, out, 2)])
    finally:
        os.close(null)
        os.close(out)


def local_user() -> str:
    """The local account running this process (``uid:N`` when it has no name)."""
    import pwd

    try:
        return pwd.getpwuid(os.getuid()).pw_name
    except KeyError:
        return f"uid:{os.getuid()}"


def json_option(f: F) -> F:
    """Give a command its own ``--json`` (the group-level one works too)."""

    @click.option("--json", "as_json", is_flag=True, help="Print machine-readable JSON.")
    @functools.wraps(f)
    def wrapper(*args: Any, as_json: bool = False, **kwargs: Any) -> Any:
        ctx = click.get_current_context().find_object(Ctx)
        if ctx is not None and as_json:
            ctx.as_json = True
        return f(*args, **kwargs)

    return wrapper  # type: ignore[return-value]


def parent_number_option(help_text: str) -> Callable[[F], F]:
    """A verb's ``--parent-number N`` (``-m N``), lakectl's spelling and the one its help shows; ``--parent N``,
    the mount's control files' older spelling, is taken too (hidden), so neither front end refuses the other's."""

    def decorate(f: F) -> F:
        @click.option("--parent-number", "-m", "parent_number", type=int, default=None, help=help_text)
        @click.option("--parent", "parent_alias", type=int, default=None, hidden=True)
        @functools.wraps(f)
        def wrapper(*args: Any, parent_number: int | None = None, parent_alias: int | None = None, **kwargs: Any) -> Any:
            if parent_number is not None and parent_alias is not None and parent_number != parent_alias:
                raise click.UsageError(f"--parent {parent_alias} and --parent-number {parent_number} disagree: give one")
            return f(*args, parent_number=parent_alias if parent_number is None else parent_number, **kwargs)

        return wrapper  # type: ignore[return-value]

    return decorate

def engine_option(f: F) -> F:
    """``--engine``: where a job's tasks run (``lakemount.jobs.inprocess.job_context``)."""
    from lakemount.jobs.inprocess import ENGINES

    return click.option(
        "--engine", type=click.Choice(ENGINES), default="auto", show_default=True,
        help="Run on Spark, in this process, or (auto) in this process when the input is small and no --master is named.",
    )(f)


def ctx_obj() -> Ctx:
    """The CLI's ``Ctx`` of the running click command (asserts one exists)."""
    obj = click.get_current_context().find_object(Ctx)
    assert obj is not None
    return obj


def emit(data: Any, text: str | Iterable[str] | None = None) -> None:
    """Print ``data`` as JSON in --json mode, else the human text."""
    if ctx_obj().as_json:
        click.echo(json.dumps(printable_tree(data), indent=2, sort_keys=False, default=str))
        return
    if text is None:
        return
    if isinstance(text, str):
        click.echo(text)
    else:
        for line in text:
            click.echo(line)


def iso(ts: float) -> str:
    """``ts`` (epoch seconds) as an ISO 8601 UTC timestamp to the second."""
    return datetime.fromtimestamp(ts, tz=UTC).isoformat(timespec="seconds")


def commit_json(c: Commit) -> dict[str, Any]:
    """A commit as lakeFS's API draws it (one shape everywhere: see ``lakemount.catalog.shapes``)."""
    from lakemount.catalog import shapes

    return shapes.commit_json(c)


def commit_text(c: Commit) -> str:
    """A commit as the CLI's human-readable block (id, author, date, merge parents, metadata, message)."""
    lines = [f"ID:            {c.id}", f"Author:        {c.committer}", f"Date:          {iso(c.creation_date)}"]
    if len(c.parents) > 1:
        lines.append("Merge:         " + " ".join(p[:12] for p in c.parents))
    for k, v in c.metadata:
        lines.append(f"Metadata:      {k} = {v}")
    lines += ["", f"    {c.message}", ""]
    return "\n".join(lines)


def entry_json(path: str, e: Entry) -> dict[str, Any]:
    """An object's stats as lakeFS's API draws them (``ObjectStats``, plus ``mode``)."""
    from lakemount.catalog import shapes

    return shapes.object_stats_json(path, e)


def progress(total: int | None, desc: str, unit: str = "it") -> tqdm:
    """A progress bar on stderr, shown when stderr is a terminal and not under --json (``unit="B"``: bytes, scaled).

    Under --json the output is for a program, which reads the result, not a bar.
    """
    from tqdm import tqdm

    ctx = click.get_current_context(silent=True)
    obj = ctx.find_object(Ctx) if ctx is not None else None
    show = sys.stderr.isatty() and not (obj is not None and obj.as_json)
    scale = {"unit_scale": True, "unit_divisor": 1024} if unit == "B" else {}
    return tqdm(total=total, desc=desc, unit=unit, file=sys.stderr, disable=not show, leave=False, **scale)


def parse_meta(pairs: tuple[str, ...]) -> list[tuple[str, str]]:
    """``key=value`` options as (key, value) pairs in order; InvalidArgument for an option without ``=``."""
    out = []
    for p in pairs:
        if "=" not in p:
            raise InvalidArgument(f"metadata must look like key=value, got {p!r}")
        k, v = p.split("=", 1)
        out.append((k, v))
    return out
