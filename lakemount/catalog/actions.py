"""Hooks as lakeFS actions: action files on the ref being acted on, run around commits, merges, branches and tags.

An action file is YAML under ``_lakefs_actions/`` (lakeFS's format)::

    name: Data checks
    on:
      pre-commit:
        branches: [main, "release-*"]      # globs; missing or empty: every branch
      pre-merge: {branches: [main]}
    hooks:
      - id: check_paths
        type: lakemount_check               # or webhook
        properties: {allowed_paths: ["tables/*"], max_size: 1048576}

Events: ``pre-``/``post-`` ``commit``, ``merge``, ``create-branch``,
``delete-branch``, ``create-tag``, ``delete-tag``, ``revert``, ``cherry-pick``,
and ``prepare-commit`` (lakeFS's: before ``pre-commit``, and a failure aborts the
commit like a pre-event's).  Files are read from the
branch being committed, reverted, picked onto or deleted, the source of a new branch, the commit a
tag names, and for a merge from both the destination (so a source branch
cannot drop the destination's guards) and the source (as lakeFS does); a file
identical in both runs once.  A pre-event's hooks run in file order and
the first failure aborts the operation with ``HookFailed`` (EPERM in the mount,
403 in the API, exit 10 in the CLI) naming the hook and its message;
post-event hooks run after the operation and never undo it.  A process runs
at most ``actions.hooks.max_running`` hooks at once; a hook that finds no turn
within ``actions.hooks.max_wait`` seconds fails, naming the limit.  Every run --
event, each hook's status, output, start and duration -- is recorded in a
:class:`RunStore` (the ref store's database); runs of events that no action
matched are not recorded.  An action file that does not parse, or is larger
than ``MAX_ACTION_FILE``, fails the pre-event (a broken guard must not silently
let data through) and is recorded as a failed hook ``(action file)``; so do
more than ``actions.max_files`` action files at a ref (none of them is read).
"""

from __future__ import annotations

import fnmatch
import secrets
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Protocol

from lakemount.config import ActionsConfig, HooksConfig
from lakemount.errors import HookFailed, InvalidArgument, TooManyActionFiles

ACTIONS_PREFIX: Final = "_lakefs_actions/"
EVENTS: Final = (
    "prepare-commit",
    *(
        f"{when}-{what}"
        for what in ("commit", "merge", "create-branch", "delete-branch", "create-tag", "delete-tag", "revert", "cherry-pick")
        for when in ("pre", "post")
    ),
)
MAX_ACTION_FILE: Final = 1 << 20
# Values an action file may hold once YAML aliases are expanded: a file of a few
# KiB of nested aliases (a "billion laughs") otherwise expands to billions of
# values when a hook walks or prints its properties.
MAX_ACTION_VALUES: Final = 100_000
MAX_OUTPUT: Final = 64 * 1024


@dataclass(frozen=True, slots=True)
class Hook:
    """One hook of an action: its id, type (``webhook``, ``lakemount_check``) and properties."""

    id: str
    type: str
    properties: Mapping[str, Any]
    description: str = ""


@dataclass(frozen=True, slots=True)
class Action:
    """A parsed action file: which events (and branches) trigger which hooks."""

    name: str
    path: str
    on: Mapping[str, tuple[str, ...]]  # event -> branch globs (empty: all)
    hooks: tuple[Hook, ...]
    description: str = ""

    def matches(self, event: str, branch: str) -> bool:
        """True if ``event`` on ``branch`` triggers this action."""
        if event not in self.on:
            return False
        globs = self.on[event]
        return not globs or any(fnmatch.fnmatchcase(branch, g) for g in globs)


def parse_action(text: str | bytes, path: str = "") -> Action:
    """Parse one action file; raises ``InvalidArgument`` with the file name and the reason."""
    import yaml  # only when there are action files: the CLI's light verbs never parse YAML

    where = path or "action file"
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise InvalidArgument(f"{where}: not valid YAML: {str(exc).splitlines()[0]}") from None
    if not _within(doc, MAX_ACTION_VALUES):
        raise InvalidArgument(f"{where}: more than {MAX_ACTION_VALUES} values once YAML aliases are expanded")
    if not isinstance(doc, dict):
        raise InvalidArgument(f"{where}: expected a mapping with name, on and hooks")
    name = doc.get("name")
    if not isinstance(name, str) or not name.strip():
        raise InvalidArgument(f"{where}: 'name' is required")
    # YAML 1.1 reads a bare ``on`` key as the boolean True.
    on_raw = doc.get("on", doc.get(True))
    if not isinstance(on_raw, dict) or not on_raw:
        raise InvalidArgument(f"{where}: 'on' must map events to {{branches: [...]}}")
    on: dict[str, tuple[str, ...]] = {}
    for event, spec in on_raw.items():
        if event not in EVENTS:
            raise InvalidArgument(f"{where}: unknown event {event!r} (one of {', '.join(EVENTS)})")
        branches: Any = []
        if spec is not None:
            if not isinstance(spec, dict):
                raise InvalidArgument(f"{where}: event {event} must be a mapping (branches: [...])")
            branches = spec.get("branches") or []
        if not isinstance(branches, list) or not all(isinstance(b, str) for b in branches):
            raise InvalidArgument(f"{where}: {event}.branches must be a list of branch globs")
        on[event] = tuple(branches)
    hooks_raw = doc.get("hooks")
    if not isinstance(hooks_raw, list) or not hooks_raw:
        raise InvalidArgument(f"{where}: 'hooks' must be a non-empty list")
    hooks: list[Hook] = []
    seen: set[str] = set()
    for h in hooks_raw:
        if not isinstance(h, dict) or not isinstance(h.get("id"), str) or not isinstance(h.get("type"), str):
            raise InvalidArgument(f"{where}: every hook needs an 'id' and a 'type'")
        if h["id"] in seen:
            raise InvalidArgument(f"{where}: duplicate hook id {h['id']!r}")
        seen.add(h["id"])
        props = h.get("properties") or {}
        if not isinstance(props, dict):
            raise InvalidArgument(f"{where}: hook {h['id']}: 'properties' must be a mapping")
        hooks.append(Hook(h["id"], h["type"], props, str(h.get("description") or "")))
    return Action(name.strip(), path, on, tuple(hooks), str(doc.get("description") or ""))


def _within(doc: Any, budget: int) -> bool:
    """Whether ``doc`` holds at most ``budget`` values, counting a shared (aliased) value each time it occurs;
    stops counting past the budget (so a recursive alias is refused too)."""
    stack = [doc]
    while stack:
        budget -= 1
        if budget < 0:
            return False
        node = stack.pop()
        if isinstance(node, dict):
            stack.extend(node.keys())
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return True


@dataclass(frozen=True, slots=True)
class Change:
    """One changed path an operation brings in (``entry_size`` None for a removal)."""

    path: str
    kind: str  # added, changed, removed
    size: int | None


@dataclass
class Event:
    """What an operation is about to do (or did): the JSON a webhook receives is :meth:`payload`."""

    type: str
    repo: str
    branch: str
    source_ref: str = ""
    commit_message: str = ""
    committer: str = ""
    commit_metadata: dict[str, str] = field(default_factory=dict)
    commit_id: str = ""
    tag_id: str = ""
    # For data checks: the changes the operation brings in (a commit's staged
    # ones, what a merge brings from its source), the ref holding their new
    # versions, and the destination's committed state.
    changes: Callable[[], Iterator[Change]] | None = None
    read_ref: str = ""
    dest_ref: str = ""

    def payload(self, run_id: str, action: str, hook_id: str) -> dict[str, Any]:
        """lakeFS's event JSON."""
        data: dict[str, Any] = {
            "event_type": self.type,
            "event_time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "action_name": action,
            "hook_id": hook_id,
            "run_id": run_id,
            "repository_id": self.repo,
            "branch_id": self.branch,
            "source_ref": self.source_ref,
            "commit_message": self.commit_message,
            "committer": self.committer,
            "commit_metadata": self.commit_metadata,
        }
        if self.commit_id:
            data["commit_id"] = self.commit_id
        if self.tag_id:
            data["tag_id"] = self.tag_id
        return data


@dataclass(frozen=True, slots=True)
class HookRun:
    """The record of one hook's run."""

    run_id: str
    hook_run_id: str
    action: str
    hook_id: str
    status: str  # completed, failed
    output: str
    start_time: float
    duration: float


@dataclass(frozen=True, slots=True)
class Run:
    """The record of one event's run of every matching action."""

    run_id: str
    repo: str
    event_type: str
    branch: str
    source_ref: str
    commit_id: str
    status: str  # completed, failed
    start_time: float
    end_time: float
    hooks: tuple[HookRun, ...] = ()


class RunStore(Protocol):
    """Where runs are recorded (``lakemount.metastore.actions.SqlRunStore``, or ``MemoryRunStore``)."""

    def record(self, run: Run) -> None: ...

    def list_runs(self, repo: str, *, branch: str | None = None, commit_id: str | None = None,
                  after: str = "", limit: int = 100) -> list[Run]: ...

    def get_run(self, repo: str, run_id: str) -> Run: ...


class MemoryRunStore:
    """Runs in a dict: for catalogs built without a database (tests, tools)."""

    def __init__(self) -> None:
        self.runs: dict[str, Run] = {}

    def record(self, run: Run) -> None:
        """Keep ``run``."""
        self.runs[run.run_id] = run

    def list_runs(self, repo: str, *, branch: str | None = None, commit_id: str | None = None,
                  after: str = "", limit: int = 100) -> list[Run]:
        """Runs of ``repo``, newest first (run ids sort by time, descending), after the run id ``after``."""
        runs = sorted((r for r in self.runs.values() if r.repo == repo), key=lambda r: r.run_id, reverse=True)
        runs = [r for r in runs if (branch is None or r.branch == branch) and (commit_id is None or r.commit_id == commit_id)]
        if after:
            runs = [r for r in runs if r.run_id < after]
        return runs[:limit]

    def get_run(self, repo: str, run_id: str) -> Run:
        """The run ``run_id``; raises ``NotFound``."""
        from lakemount.errors import NotFound

        run = self.runs.get(run_id)
        if run is None or run.repo != repo:
            raise NotFound(f"action run not found: {repo}/{run_id}")
        return run


def new_run_id(now: float) -> str:
    """A run id that sorts newest-first when compared descending: time in microseconds, then randomness."""
    return f"{int(now * 1_000_000):016x}{secrets.token_hex(4)}"


class HookFailure(Exception):
    """Raised by a hook implementation: the hook failed with this message."""


HookRunner = Callable[[Hook, Event, dict[str, Any], "HookContext"], str]


class ActionSource(Protocol):
    """What the runner needs from the catalog: the action files at a ref, and object reads for checks."""

    def action_files(self, repo: str, ref: str, most: int) -> list[tuple[str, bytes | None]]: ...  # None: over MAX_ACTION_FILE


@dataclass(frozen=True, slots=True)
class HookLimits:
    """How many hooks a process runs at once (``actions.hooks.max_running``) and how long a hook waits
    for a turn (``max_wait`` seconds) before it fails naming the limit.  Hooks are slow and chosen by
    whoever may write a branch: without a bound, a hundred commits under a webhook that takes its full
    timeout hold a hundred server threads and connections."""

    max_running: int = HooksConfig().max_running
    max_wait: float = HooksConfig().max_wait
    max_files: int = ActionsConfig().max_files  # action files an event reads at one ref (actions.max_files)


@dataclass
class HookContext:
    """Services hooks may use: the catalog (for data checks) and the addresses webhooks may reach
    (a ``hooks.WebhookPolicy``; None: the default policy)."""

    catalog: Any
    webhooks: Any = None


class Actions:
    """Finds the actions an event triggers, runs their hooks, records the run."""

    def __init__(self, source: ActionSource, store: RunStore, runners: Mapping[str, HookRunner],
                 context: HookContext, clock: Callable[[], float] = time.time,
                 on_run: Callable[[Run], None] | None = None, limits: HookLimits | None = None) -> None:
        self.source = source
        self.store = store
        self.runners = dict(runners)
        self.context = context
        self.clock = clock
        self.on_run = on_run
        self.limits = limits or HookLimits()
        self._turns = threading.BoundedSemaphore(self.limits.max_running)

    def load(self, repo: str, *refs: str) -> tuple[list[Action], list[tuple[str, str]]]:
        """The actions at ``refs`` (a file identical at several counts once) and the (path, reason) of files that do not parse."""
        actions: list[Action] = []
        broken: list[tuple[str, str]] = []
        seen: set[tuple[str, bytes]] = set()
        for ref in dict.fromkeys(refs):
            try:
                files = self.source.action_files(repo, ref, self.limits.max_files)
            except TooManyActionFiles as exc:
                broken.append((ACTIONS_PREFIX, str(exc)))
                continue
            for path, data in files:
                if data is None:
                    broken.append((path, f"{path}: larger than {MAX_ACTION_FILE} bytes, the most an action file may hold"))
                    continue
                if (path, data) in seen:
                    continue
                seen.add((path, data))
                try:
                    actions.append(parse_action(data, path))
                except InvalidArgument as exc:
                    broken.append((path, str(exc)))
        return actions, broken

    def run(self, event: Event, *refs: str) -> Run | None:
        """Run every hook ``event`` triggers, reading actions at ``refs``; returns the recorded run or None.

        For a ``pre-`` event a failed hook raises ``HookFailed`` (after the
        run is recorded) and later hooks do not run.  ``post-`` events never
        raise for a hook's failure.
        """
        actions, broken = self.load(event.repo, *refs)
        matching = [a for a in actions if a.matches(event.type, event.branch)]
        pre = event.type.startswith("pre-") or event.type == "prepare-commit"  # a failure aborts the operation
        if not matching and not (broken and pre):
            return None
        start = self.clock()
        run_id = new_run_id(start)
        hook_runs: list[HookRun] = []
        failed: HookRun | None = None
        if broken and pre:
            for path, reason in broken:
                hook_runs.append(HookRun(run_id, f"{run_id}-{len(hook_runs):04d}", path, "(action file)", "failed", reason, start, 0.0))
            failed = hook_runs[0]
        for action in matching if failed is None else []:
            for hook in action.hooks:
                hr = self._run_hook(run_id, len(hook_runs), action, hook, event)
                hook_runs.append(hr)
                if hr.status == "failed" and pre:
                    failed = hr
                    break
            if failed is not None:
                break
        end = self.clock()
        status = "failed" if any(h.status == "failed" for h in hook_runs) else "completed"
        run = Run(run_id, event.repo, event.type, event.branch, event.source_ref, event.commit_id, status, start, end, tuple(hook_runs))
        self.store.record(run)
        if self.on_run is not None:
            self.on_run(run)
        if failed is not None:
            raise HookFailed(event.type, failed.action, failed.hook_id, failed.output.strip().splitlines()[0] if failed.output.strip() else "failed", run_id)
        return run

    def _run_hook(self, run_id: str, n: int, action: Action, hook: Hook, event: Event) -> HookRun:
        started = self.clock()
        t0 = time.monotonic()
        runner = self.runners.get(hook.type)
        try:
            if runner is None:
                raise HookFailure(f"unknown hook type {hook.type!r} (known: {', '.join(sorted(self.runners))})")
            if not self._turns.acquire(timeout=self.limits.max_wait):
                raise HookFailure(f"not run: {self.limits.max_running} hooks were already running in this process "
                                  f"(actions.hooks.max_running) for the {self.limits.max_wait:g}s it may wait (actions.hooks.max_wait)")
            try:
                output = runner(hook, event, event.payload(run_id, action.name, hook.id), self.context)
            finally:
                self._turns.release()
            status = "completed"
        except HookFailure as exc:
            output, status = str(exc), "failed"
        except Exception as exc:  # a hook's own bug must fail the hook, not the process
            output, status = f"hook error: {type(exc).__name__}: {exc}", "failed"
        return HookRun(run_id, f"{run_id}-{n:04d}", action.name, hook.id, status, output[:MAX_OUTPUT], started, time.monotonic() - t0)
