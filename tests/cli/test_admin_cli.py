"""A new platform engineer's pass over the administration side of the CLI: help, repositories, exit codes."""

from __future__ import annotations

import click

from tests.cli.test_newuser import _leaves


def test_every_visible_option_says_what_it_does() -> None:
    # `lakemount pr merge --help` listed a bare `--squash`, `pr create` a bare `--title`.
    from lakemount.cli.main import cli

    bare = [
        f"{' '.join(path)} {param.opts[0]}"
        for path, command in _leaves(cli)
        for param in command.params
        if isinstance(param, click.Option) and not param.hidden and not (param.help or "").strip()
    ]
    assert bare == []
