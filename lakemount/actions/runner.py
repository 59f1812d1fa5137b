"""The runner: finds the actions an event triggers, runs their hooks in turn, records the run.

Files are read from the branch being committed or deleted, the source of a new
branch, the commit a tag names, and for a merge from both the destination (so
a source branch cannot drop the destination's guards) and the source (as
lakeFS does); a file identical in both runs once.  A pre-event's hooks run in
file order and the first failure aborts the operation with ``HookFailed``
(EPERM in the mount, 403 in the API, exit 10 in the CLI) naming the hook and
its message; post-event hooks run after the operation and never undo it.  A
process runs at most ``actions.hooks.max_running`` hooks at once; a hook that
finds no turn within ``actions.hooks.max_wait`` seconds fails, naming the
limit.  Every run is recorded (``runs.py``); runs of events that no action
matched are not recorded.  An action file that does not parse, or is larger
than ``MAX_ACTION_FILE``, fails the pre-event (a broken guard must not silently
let data through) and is recorded as a failed hook ``(action file)``; so do
more than ``actions.max_files`` action files at a ref (none of them is read).

The catalog owns the runner (``Catalog.actions``) and calls it from its verbs;
the runner sees the catalog only through :class:`ActionSource` and, for the
hooks, :class:`~lakemount.actions.hook.HookContext`.  Most events match no action:
the run store and the hook types (the webhook client pulls in HTTP, the store
SQLAlchemy) are made when a run is first recorded or a hook first runs.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from typing import Final, Protocol

from lakemount.actions.events import Event, aborts
from lakemount.actions.hook import HookContext, HookFailure, HookRunner
from lakemount.actions.parser import ACTIONS_PREFIX, MAX_ACTION_FILE, Action, Hook, parse_action
from lakemount.actions.runs import HookRun, Run, RunStore, new_run_id
from lakemount.config import ActionsConfig, HooksConfig
from lakemount.errors import HookFailed, InvalidArgument, TooManyActionFiles
from lakemount.records import record

MAX_OUTPUT: Final = 64 * 1024


class ActionSource(Protocol):
    """What the runner needs from the catalog: the action files at a ref (checks read objects through
    ``HookContext.catalog``)."""

    def action_files(self, repo: str, ref: str, most: int) -> list[tuple[str, bytes | None]]: ...  # None: over MAX_ACTION_FILE


@record(frozen=True, slots=True)
class HookLimits:
    """How many hooks a process runs at once (``actions.hooks.max_running``) and how long a hook waits
    for a turn (``max_wait`` seconds) before it fails naming the limit.  Hooks are slow and chosen by
    whoever may write a branch: without a bound, a hundred commits under a webhook that takes its full
    timeout hold a hundred server threads and connections."""

    max_running: int = HooksConfig().max_running
    max_wait: float = HooksConfig().max_wait
    max_files: int = ActionsConfig().max_files  # action files an event reads at one ref (actions.max_files)


class Actions:
    """Finds the actions an event triggers, runs their hooks, records the run."""

    def __init__(self, source: ActionSource, store: Callable[[], RunStore], runners: Mapping[str, HookRunner] | None,
                 context: HookContext, clock: Callable[[], float] = time.time,
                 on_run: Callable[[Run], None] | None = None, limits: HookLimits | None = None) -> None:
        """``store`` makes the run store on first use; ``runners`` are the hook types by name (None: the built-in
        ones, ``actions.builtin.RUNNERS``, imported when a hook first runs)."""
        self.source = source
        self._make_store = store
        self._store: RunStore | None = None
        self._runners = None if runners is None else dict(runners)
        self.context = context
        self.clock = clock
        self.on_run = on_run
        self.limits = limits or HookLimits()
        self._turns = threading.BoundedSemaphore(self.limits.max_running)

    @property
    def store(self) -> RunStore:
        """Where runs are recorded (made on first use)."""
        if self._store is None:
            self._store = self._make_store()
        return self._store

    @property
    def runners(self) -> dict[str, HookRunner]:
        """The hook types by name."""
        if self._runners is None:
            from lakemount.actions.builtin import RUNNERS

            self._runners = dict(RUNNERS)
        return self._runners

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

        For a ``pre-`` event (and ``prepare-commit``: :func:`~lakemount.actions.events.aborts`) a failed hook raises ``HookFailed`` (after the
        run is recorded) and later hooks do not run.  ``post-`` events never
        raise for a hook's failure.
        """
        actions, broken = self.load(event.repo, *refs)
        matching = [a for a in actions if a.matches(event.type, event.branch)]
        pre = aborts(event.type)
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
