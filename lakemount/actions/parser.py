"""Action files: lakeFS's YAML under ``_lakefs_actions/``, parsed into :class:`Action` records.

An action file names the events (and branch globs) that trigger it and the
hooks to run::

    name: Data checks
    on:
      pre-commit:
        branches: [main, "release-*"]      # globs; missing or empty: every branch
      pre-merge: {branches: [main]}
    hooks:
      - id: check_paths
        type: lakemount_check               # or webhook
        properties: {allowed_paths: ["tables/*"], max_size: 1048576}

Whoever may write a branch may write an action file, so parsing is bounded:
a file over ``MAX_ACTION_FILE`` bytes is not read, and one that expands to
more than ``MAX_ACTION_VALUES`` values through YAML aliases is refused.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping
from typing import Any, Final

from lakemount.actions.events import EVENTS
from lakemount.errors import InvalidArgument
from lakemount.records import record

ACTIONS_PREFIX: Final = "_lakefs_actions/"
MAX_ACTION_FILE: Final = 1 << 20
# Values an action file may hold once YAML aliases are expanded: a file of a few
# KiB of nested aliases (a "billion laughs") otherwise expands to billions of
# values when a hook walks or prints its properties.
MAX_ACTION_VALUES: Final = 100_000


@record(frozen=True, slots=True)
class Hook:
    """One hook of an action: its id, type (``webhook``, ``lakemount_check``) and properties."""

    id: str
    type: str
    properties: Mapping[str, Any]
    description: str = ""


@record(frozen=True, slots=True)
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
