"""Action files: what parses, what is refused, and that YAML aliases cannot blow a file up (``actions/parser.py``)."""

from __future__ import annotations

import time

import pytest

from lakemount.actions.parser import parse_action
from lakemount.catalog.catalog import Catalog
from lakemount.errors import HookFailed, InvalidArgument
from tests.actions.conftest import R, action, webhook_action


def test_action_files_parse_and_refuse_bad_input() -> None:
    a = parse_action(webhook_action("http://x/y", "pre-merge"), "_lakefs_actions/a.yaml")
    assert a.name == "hook it" and a.on == {"pre-merge": ("main", "feat-*")}
    assert a.matches("pre-merge", "feat-1") and not a.matches("pre-merge", "dev") and not a.matches("pre-commit", "main")
    assert parse_action("name: all\non:\n  post-commit:\nhooks: [{id: a, type: webhook}]").matches("post-commit", "any")
    for bad, why in [
        ("[1, 2", "not valid YAML"),
        ("- a", "expected a mapping"),
        ("on: {pre-commit: {}}\nhooks: [{id: a, type: webhook}]", "'name' is required"),
        ("name: n\non: {pre-push: {}}\nhooks: [{id: a, type: webhook}]", "unknown event"),
        ("name: n\non: {pre-commit: {branches: main}}\nhooks: [{id: a, type: webhook}]", "must be a list"),
        ("name: n\non: {pre-commit: {}}\nhooks: []", "non-empty list"),
        ("name: n\non: {pre-commit: {}}\nhooks: [{id: a, type: webhook}, {id: a, type: webhook}]", "duplicate"),
    ]:
        with pytest.raises(InvalidArgument, match=why):
            parse_action(bad, "f.yaml")


def test_yaml_alias_bombs_are_refused_cheaply(cat: Catalog) -> None:
    # Nine levels of nine aliases: 387 million strings once expanded; the webhook's str() of a header
    # value took a worker's memory (gigabytes) and minutes of CPU.
    levels = ['a0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    levels += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, 9)]
    bomb = "\n".join(levels) + "\nname: bomb\non: {pre-commit: {}}\nhooks: [{id: x, type: webhook, properties: {url: http://127.0.0.1:9/, headers: {X: *a8}}}]\n"
    action(cat, "main", "bomb", bomb)
    t0 = time.monotonic()
    with pytest.raises(HookFailed, match="more than 100000 values once YAML aliases are expanded"):
        cat.commit(R, "main", "m")
    assert time.monotonic() - t0 < 5
    with pytest.raises(InvalidArgument, match="once YAML aliases are expanded"):
        parse_action("a: &a [*a]\nname: n\non: {pre-commit: {}}\nhooks: [{id: x, type: webhook}]")
    # Modest anchors stay usable.
    ok = parse_action("b: &b [main, release-*]\nname: n\non: {pre-commit: {branches: *b}, pre-merge: {branches: *b}}\n"
                      "hooks: [{id: x, type: webhook}]")
    assert ok.matches("pre-merge", "release-1")
