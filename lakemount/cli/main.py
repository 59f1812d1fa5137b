"""The ``lakemount`` command: one entry point whose verbs mirror lakectl's.

Each verb lives in its own module; this one builds the group, registers the
verbs, and turns lakemount errors into one line on stderr and a non-zero exit.
"""

from __future__ import annotations

import sys

import click

from lakemount.cli.common import Ctx
from lakemount.errors import (
    AlreadyExists,
    Conflict,
    Corrupt,
    InvalidArgument,
    LakeMountError,
    NotFound,
    PermissionDenied,
    PreconditionFailed,
    ReadOnly,
    Unavailable,
    category_of,
)

# Exit status by error category (usage errors from click exit 2).
EXIT_CODES: dict[type[LakeMountError], int] = {
    NotFound: 3,
    AlreadyExists: 4,
    Conflict: 5,
    PreconditionFailed: 6,
    InvalidArgument: 2,
    ReadOnly: 7,
    PermissionDenied: 10,
    Corrupt: 8,
    Unavailable: 9,
    LakeMountError: 1,
}


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.option("--config", "-c", envvar="LAKEMOUNT_CONFIG", help="YAML configuration file (default: built-in embedded setup).")
@click.option("--json", "as_json", is_flag=True, help="Print machine-readable JSON.")
@click.version_option(package_name="lakemount")
@click.pass_context
def cli(ctx: click.Context, config: str | None, as_json: bool) -> None:
    """lakemount: git for data lakes, as a filesystem.

    Versioned repositories of objects, with branches, commits and merges; mounted as
    POSIX directories and served over an S3 gateway.  URIs look like
    lakefs://REPO/REF/PATH, where REF is a branch, a tag, a commit id or an
    expression such as main~2, main^2, main@ (committed only) or main$ (staged only).

    State lives under LAKEMOUNT_HOME (default ~/.lakemount) unless a configuration
    file or LAKEMOUNT_* variables say otherwise.
    """
    ctx.obj = Ctx(config, as_json)


def _register() -> None:
    """Register every verb: each module of this package that defines ``COMMANDS``.

    Discovery instead of a hand-kept list, so adding a verb is adding a module.
    """
    import importlib
    import pkgutil

    import lakemount.cli as package

    for info in sorted(pkgutil.iter_modules(package.__path__), key=lambda m: m.name):
        module = importlib.import_module(f"{package.__name__}.{info.name}")
        for command in getattr(module, "COMMANDS", ()):
            cli.add_command(command)


_register()


def main(argv: list[str] | None = None) -> None:
    try:
        cli.main(args=argv, prog_name="lakemount", standalone_mode=False)
    except click.exceptions.Abort:
        click.echo("aborted", err=True)
        sys.exit(130)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except LakeMountError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(EXIT_CODES.get(category_of(exc), 1))
    except KeyboardInterrupt:
        click.echo("interrupted", err=True)
        sys.exit(130)
    except BrokenPipeError:
        sys.exit(0)


if __name__ == "__main__":
    main()
