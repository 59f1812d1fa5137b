"""The lazy command group: ``--help`` lists every verb without importing it, and quick verbs stay light (issue 10)."""

from __future__ import annotations

import importlib
import os
import pkgutil
import subprocess
import sys
from pathlib import Path

import click
from click.testing import CliRunner

import lakemount.cli as cli_package
from lakemount.cli.group import VERBS, LazyGroup, cli

HEAVY = ("sqlalchemy", "boto3", "botocore", "tqdm", "yaml", "cryptography", "trio", "pyfuse3", "uvicorn", "pyspark")


def _declared() -> dict[str, tuple[str, click.Command]]:
    """Every verb the cli modules declare in COMMANDS: name -> ("module:attribute", command)."""
    out = {}
    for info in pkgutil.iter_modules(cli_package.__path__):
        module = importlib.import_module(f"{cli_package.__name__}.{info.name}")
        for command in getattr(module, "COMMANDS", ()):
            attribute = next(k for k, v in vars(module).items() if v is command)
            out[command.name] = (f"{module.__name__}:{attribute}", command)
    return out


def test_the_verb_table_matches_the_modules() -> None:
    declared = _declared()
    assert set(VERBS) == set(declared), "VERBS in lakemount/cli/group.py must name every verb in a COMMANDS list"
    for name, (target, command) in declared.items():
        summary = " ".join((command.help or "").partition("\n\n")[0].split())
        entry = f"{name!r}: ({target!r}, {summary!r}),"
        assert VERBS[name] == (target, summary), f"VERBS in lakemount/cli/group.py is stale; the entry should be: {entry}"


def test_help_is_the_same_as_with_every_verb_imported() -> None:
    eager = click.Group(cli.name, params=cli.params, callback=cli.callback, help=cli.help,
                        context_settings=cli.context_settings)
    for name, (_target, command) in _declared().items():
        eager.add_command(command, name)
    runner = CliRunner()
    for width in (80, 100, 60):
        lazy = LazyGroup(cli.name, params=cli.params, callback=cli.callback, help=cli.help,
                         context_settings=cli.context_settings, verbs=VERBS)
        got = runner.invoke(lazy, ["--help"], prog_name="lakemount", terminal_width=width)
        want = runner.invoke(eager, ["--help"], prog_name="lakemount", terminal_width=width)
        assert got.exit_code == want.exit_code == 0
        assert got.output == want.output
        assert lazy.commands == {}  # nothing imported for the listing


def _imported_after(args: list[str], env: dict[str, str]) -> set[str]:
    script = (
        "import sys\n"
        "from lakemount.cli.main import main\n"
        f"sys.argv = ['lakemount', *{args!r}]\n"
        "try:\n    main()\nfinally:\n"
        f"    print(sorted({{m.split('.')[0] for m in sys.modules}} & set({HEAVY!r})), file=sys.stderr)\n"
    )
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0, r.stderr
    return set(eval(r.stderr.strip().splitlines()[-1]))


def test_help_and_fs_cat_import_nothing_heavy(tmp_path: Path) -> None:
    env = {**os.environ, "LAKEMOUNT_HOME": str(tmp_path / "home")}
    env.pop("LAKEMOUNT_CONFIG", None)
    assert _imported_after(["--help"], env) == set()
    assert _imported_after(["fs", "--help"], env) == set()
    subprocess.run([sys.executable, "-m", "lakemount.cli.main", "up", "--no-services"], env=env, check=True,
                   capture_output=True, timeout=120)
    assert _imported_after(["fs", "cat", "lakefs://demo/main/README.md"], env) == set()
    assert _imported_after(["fs", "cat", "lakefs://demo/v1/README.md"], env) == set()


def test_unknown_verb_is_a_usage_error() -> None:
    r = CliRunner().invoke(cli, ["no-such-verb"])
    assert r.exit_code == 2
    assert "No such command 'no-such-verb'" in r.output
