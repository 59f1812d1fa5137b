"""The stored ``lakemount --help`` (lakemount/cli/helptext.py) is what the click group prints, and it is printed without click (issue 41)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from lakemount.cli.group import cli, help_text
from lakemount.cli.helptext import HELP
from lakemount.cli.main import help_width

ROOT = Path(__file__).resolve().parents[2]
STALE = "lakemount/cli/helptext.py is stale: run `python scripts/cli_help.py`"


@pytest.mark.parametrize("width", sorted(HELP))
def test_the_stored_help_is_what_click_prints(width: int) -> None:
    printed = CliRunner().invoke(cli, ["--help"], prog_name="lakemount", terminal_width=width)
    assert printed.exit_code == 0, printed.output
    assert printed.output == help_text(width) + "\n"
    assert HELP[width] == help_text(width), STALE


@pytest.mark.parametrize("columns", [None, "80", "79", "100", "120", "60", "30", "0", "-5", "wide"])
def test_the_width_is_the_one_click_formats_at(columns: str | None, monkeypatch: pytest.MonkeyPatch) -> None:
    if columns is None:
        monkeypatch.delenv("COLUMNS", raising=False)
    else:
        monkeypatch.setenv("COLUMNS", columns)
    assert help_width() == click.HelpFormatter(max_width=cli.context_settings["max_content_width"]).width


def _help(columns: str) -> tuple[str, bool]:
    """What ``lakemount --help`` prints at COLUMNS=``columns`` in a fresh process, and whether it imported click."""
    script = (
        "import sys\n"
        "from lakemount.cli.main import main\n"
        "sys.argv = ['lakemount', '--help']\n"
        "try:\n    main()\nfinally:\n    print('click' in sys.modules, file=sys.stderr)\n"
    )
    env = {**os.environ, "COLUMNS": columns, "PYTHONPATH": str(ROOT)}
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=60)
    assert r.returncode == 0, r.stderr
    return r.stdout, r.stderr.strip().splitlines()[-1] == "True"


@pytest.mark.parametrize(("columns", "width"), [("80", 78), ("120", 98)])
def test_help_at_a_stored_width_is_printed_without_click(columns: str, width: int) -> None:
    assert _help(columns) == (HELP[width] + "\n", False)


def test_help_at_another_width_is_clicks() -> None:
    assert 68 not in HELP
    assert _help("70") == (help_text(68) + "\n", True)
