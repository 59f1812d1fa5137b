"""The ``lakemount`` command's click group: verbs that mirror lakectl's, imported when they run.

Each verb lives in its own module (which lists it in ``COMMANDS``); this one
builds the group, names the verbs in :data:`VERBS`, and turns lakemount errors
into one line on stderr and a non-zero exit (:func:`run`).  A verb's module is
imported only when that verb runs, so a quick ``fs cat`` does not pay for the
rest (``benchmarks/cli_startup_bench.py`` measures it); the entry point,
lakemount/cli/main.py, answers a plain ``lakemount --help`` without this module
(lakemount/cli/helptext.py).
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Mapping

import click

from lakemount.errors import (
    AlreadyExists,
    Conflict,
    Corrupt,
    InvalidArgument,
    LakeMountError,
    MergeConflict,
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


# verb -> ("module:attribute", the first paragraph of its help).  ``--help`` lists
# the verbs from here without importing them; tests/cli/test_lazy_cli.py checks
# this table against every module's COMMANDS.
VERBS: dict[str, tuple[str, str]] = {
    "actions": ("lakemount.cli.actions:actions", "Hook runs (lakeFS actions under _lakefs_actions/) and action files."),
    "api": ("lakemount.cli.api:api", "Run the REST API (lakeFS's /api/v1 for lakeFS's clients) until interrupted."),
    "audit": ("lakemount.cli.audit:audit", "Show who read and changed what in lakefs://REPO through every front end (oldest first)."),
    "auth": ("lakemount.cli.auth:auth", "Manage users, groups, their access keys and their policies."),
    "branch": ("lakemount.cli.branch:branch", "Create, list, show and delete branches."),
    "branch-protect": ("lakemount.cli.branch:protect", "Protect branches: a protected branch changes only by merge or revert."),
    "cherry-pick": ("lakemount.cli.cherry_pick:cherry_pick", "Apply the change COMMIT (lakefs://REPO/REF) introduced onto BRANCH (lakefs://REPO/BRANCH)."),
    "commit": ("lakemount.cli.commit:commit", "Commit the uncommitted changes of branch URI (lakefs://REPO/BRANCH)."),
    "diff": ("lakemount.cli.diff:diff", "Show changes."),
    "doctor": ("lakemount.cli.doctor:doctor", "Check the configuration, the ref store, the block store and FUSE; exit non-zero on a failure."),
    "export": ("lakemount.cli.export:export", "Export the objects under URI (lakefs://REPO/REF[/PREFIX]) byte for byte."),
    "fs": ("lakemount.cli.fs:fs", "Work with objects: ls, cat, stat, upload, download, rm."),
    "gc": ("lakemount.cli.gc:gc", "Garbage collection: retention rules and the job that trashes, then deletes, expired data."),
    "import": ("lakemount.cli.import_:import_", "Import objects without copying them: entries point at the objects where they are."),
    "log": ("lakemount.cli.log:log", "Show the history of URI (lakefs://REPO/REF), newest first."),
    "merge": ("lakemount.cli.merge:merge", "Merge SOURCE (lakefs://REPO/REF) into DESTINATION (lakefs://REPO/BRANCH)."),
    "mount": ("lakemount.cli.mount:mount", "Mount the repositories at MOUNTPOINT: MOUNTPOINT/<repo>/<ref>/... (branches read-write)."),
    "umount": ("lakemount.cli.mount:umount", "Unmount MOUNTPOINT; waits until the mount process has saved everything and exited."),
    "pr": ("lakemount.cli.pr:pr", "Pull requests: propose merging a branch, discuss, approve, merge."),
    "recover": ("lakemount.cli.recover:recover", "Rebuild repositories, branches, tags and commits from the block store."),
    "repo": ("lakemount.cli.repo:repo", "Create, list and delete repositories."),
    "reset": ("lakemount.cli.reset:reset", "Drop uncommitted changes of URI (lakefs://REPO/BRANCH[/PATH])."),
    "revert": ("lakemount.cli.revert:revert", "Revert COMMITS on BRANCH (lakefs://REPO/BRANCH), one new commit each, in order."),
    "serve": ("lakemount.cli.serve:serve", "Run the S3 gateway (bucket = repository, key = REF/PATH) and the REST API until interrupted."),
    "show": ("lakemount.cli.show:show", "Show the commit URI (lakefs://REPO/REF) resolves to."),
    "tag": ("lakemount.cli.tag:tag", "Create, list, show and delete tags."),
    "up": ("lakemount.cli.up:up", "Bring up lakemount on embedded defaults with a demo repository."),
}


class Interrupted(Exception):  # noqa: N818 - it is Ctrl-C, not an error of lakemount's
    """Ctrl-C in a verb; the message (may be empty) says what the verb left behind."""


class LazyGroup(click.Group):
    """A group whose verbs are imported when invoked; its help lists them from a table of summaries."""

    def __init__(self, *args: object, verbs: Mapping[str, tuple[str, str]], **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.verbs = dict(verbs)

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *self.verbs})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        """The verb ``cmd_name``, importing its module on first use; None if there is no such verb."""
        command = super().get_command(ctx, cmd_name)
        if command is None and cmd_name in self.verbs:
            module, _, attribute = self.verbs[cmd_name][0].partition(":")
            command = getattr(importlib.import_module(module), attribute)
            assert isinstance(command, click.Command)
            self.add_command(command, cmd_name)
        return command

    def invoke(self, ctx: click.Context) -> object:
        """Run the verb; Ctrl-C leaves as :class:`Interrupted`, so that click prints no blank line before ours."""
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt as exc:
            raise Interrupted(str(exc)) from exc
        except (click.ClickException, click.exceptions.Abort, click.exceptions.Exit):
            raise
        except Exception as exc:
            from lakemount.cli.common import Ctx

            if isinstance(ctx.obj, Ctx):  # a failed verb is an audit record too, with its status
                ctx.obj.failed(exc)
            raise

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """Like click's, with a stand-in per verb not imported yet: the same rows, no imports."""
        commands = []
        for name in self.list_commands(ctx):
            command = self.commands.get(name)
            if command is None:
                command = click.Command(name, help=self.verbs[name][1])
            if not command.hidden:
                commands.append((name, command))
        if commands:
            limit = formatter.width - 6 - max(len(name) for name, _ in commands)
            with formatter.section("Commands"):
                formatter.write_dl([(name, command.get_short_help_str(limit)) for name, command in commands])


@click.group(
    cls=LazyGroup,
    verbs=VERBS,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
)
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
    from lakemount.cli.common import Ctx  # every verb's module imports it; ``--help`` need not (issue 41)

    ctx.obj = Ctx(config, as_json)


def _fail(message: str, code: int, as_json: bool, category: str | None = None, **extra: object) -> None:
    """Report an error as one line on stderr (and as lakeFS's ``Error`` JSON on stdout under --json), then exit."""
    if as_json:
        import json

        from lakemount.catalog.shapes import error_json

        click.echo(json.dumps({**error_json(message, code=code, category=category), **extra}, indent=2))
    click.echo(f"error: {message}", err=True)
    sys.exit(code)


def _interrupted(message: str, as_json: bool) -> None:
    """Exit 130 after Ctrl-C: with what the verb left behind (``message``) as an error line, else "interrupted"."""
    if message:
        _fail(message, 130, as_json, "interrupted")
    click.echo("interrupted", err=True)
    sys.exit(130)


def run(args: list[str]) -> None:
    """Run ``lakemount ARGS``: a failure is one line on stderr and ``SystemExit`` with its status by category."""
    from lakemount.private import keep_private

    keep_private()
    as_json = "--json" in args[: args.index("--")] if "--" in args else "--json" in args
    try:
        cli.main(args=args, prog_name="lakemount", standalone_mode=False)
    except click.exceptions.Abort as exc:
        # Ctrl-C in a verb arrives as Interrupted (below); here only Ctrl-C while click parses (the
        # cause) or at a prompt (the context: click raises Abort "from None").
        cause = exc.__cause__ or exc.__context__
        if isinstance(cause, KeyboardInterrupt):
            _interrupted(str(cause), as_json)
        # A confirmation answered no (or stdin closed): nothing was done, but it was no interrupt.
        _fail("aborted: nothing was changed", 1, as_json, "aborted")
    except Interrupted as exc:
        if sys.stderr.isatty():
            click.echo(err=True)  # end the line the terminal's ^C is on
        _interrupted(str(exc), as_json)
    except click.ClickException as exc:
        if as_json:
            _fail(exc.format_message(), exc.exit_code, True, "usage")
        exc.show()
        sys.exit(exc.exit_code)
    except LakeMountError as exc:
        category = category_of(exc)
        extra = {"conflicts": exc.paths} if isinstance(exc, MergeConflict) else {}
        _fail(str(exc), EXIT_CODES.get(category, 1), as_json, category.__name__, **extra)
    except KeyboardInterrupt:
        click.echo("interrupted", err=True)
        sys.exit(130)
    except BrokenPipeError:
        sys.exit(0)
    except OSError as exc:
        # Local files: a missing directory, a permission, a full disk.  One line, never a traceback.
        where = f": {exc.filename}" if exc.filename else ""
        _fail(f"{exc.strerror or exc}{where}", 1, as_json, "local")
    except Exception as exc:  # noqa: BLE001 - a bug still gets one line, not a traceback
        if os.environ.get("LAKEMOUNT_DEBUG"):
            raise
        _fail(f"internal error: {type(exc).__name__}: {exc} (LAKEMOUNT_DEBUG=1 shows the traceback)", 1, as_json, "internal")


def help_text(width: int) -> str:
    """What ``lakemount --help`` prints when click formats it ``width`` columns wide, less the final newline.

    lakemount/cli/helptext.py stores it for the usual widths (scripts/cli_help.py writes that file from here).
    """
    ctx = cli.make_context("lakemount", [], resilient_parsing=True, terminal_width=width)
    return cli.get_help(ctx)
