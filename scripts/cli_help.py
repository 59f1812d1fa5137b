"""Write lakemount/cli/helptext.py: ``lakemount --help`` as the click group prints it, at the widths it is stored for.

    python scripts/cli_help.py

Run it after changing the group's options, its help text or a verb's summary
(``VERBS`` in lakemount/cli/group.py); tests/cli/test_helptext.py fails until
the stored text is what click prints.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from lakemount.cli.group import help_text  # noqa: E402 - this tree's, whatever is installed

# 78: standard output not a terminal (shutil's fallback of 80 columns, less click's 2) or an 80-column
# terminal; 98: a terminal of 100 columns or more (the group's max_content_width of 100, less 2).
WIDTHS = (78, 98)

HEADER = '''"""``lakemount --help`` as the click group prints it, by width: what lakemount/cli/main.py prints without click.

Written by scripts/cli_help.py from lakemount/cli/group.py; do not edit by hand.
tests/cli/test_helptext.py fails when it differs from what click prints.
"""

from __future__ import annotations

'''


def render() -> str:
    """The text of lakemount/cli/helptext.py for the group as it is now."""
    lines = [HEADER, "HELP: dict[int, str] = {\n"]
    for width in WIDTHS:
        lines.append(f"    {width}: (\n")
        for line in help_text(width).splitlines(keepends=True):
            lines.append(f"        {line!r}\n")
        lines.append("    ),\n")
    lines.append("}\n")
    return "".join(lines)


def main() -> None:
    """Rewrite lakemount/cli/helptext.py."""
    target = ROOT / "lakemount" / "cli" / "helptext.py"
    target.write_text(render())
    print(f"wrote {target.relative_to(ROOT)} ({', '.join(map(str, WIDTHS))} columns)")


if __name__ == "__main__":
    main()
