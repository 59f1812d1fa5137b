"""The documents match the code: the tests, commands, configuration and URIs they show exist and parse.

docs/SEMANTICS.md backs each claim with a test (a function ``test_*`` or a module
``test_*.py``); a renamed or deleted test must not leave a claim without evidence.
A reader copies ``lakemount ...`` lines, configuration files and ``lakefs://`` URIs
out of README.md and docs/*.md: each is checked against click's command tree, the
typed configuration and the CLI's URI parser, without running anything.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import inspect
import pathlib
import re
import shlex
import textwrap

import click
import pytest

from lakemount import config
from lakemount.cli.common import parse_repo_uri, parse_uri
from lakemount.cli.group import VERBS, cli
from lakemount.config import Config
from lakemount.errors import ConfigError, InvalidArgument

ROOT = pathlib.Path(__file__).resolve().parent.parent
NAME = re.compile(r"\btest_[A-Za-z0-9_]+\b")


def documents() -> list[str]:
    """README.md and every page under docs/."""
    return ["README.md", *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "docs").glob("*.md"))]


@functools.cache  # parsing every test module takes half a second; once per run is enough
def _defined_tests() -> tuple[frozenset[str], frozenset[str]]:
    functions: set[str] = set()
    modules: set[str] = set()
    for path in (ROOT / "tests").rglob("*.py"):
        modules.add(path.stem)
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                functions.add(node.name)
    return frozenset(functions), frozenset(modules)


def named_tests(text: str) -> set[str]:
    """The test names a document cites (``test_x``, ``test_x.py``, ``tests/a/test_x.py::test_y``)."""
    return set(NAME.findall(text))


@pytest.mark.parametrize("doc", documents())
def test_every_test_a_document_names_exists(doc: str) -> None:
    functions, modules = _defined_tests()
    missing = sorted(n for n in named_tests((ROOT / doc).read_text()) if n not in functions and n not in modules)
    assert not missing, f"{doc} names tests that do not exist: {missing}"


# A file a document names: ``../x/y.md``, or a relative path with a known suffix not inside an absolute
# path (``/lake/demo/main~1/README.md`` is a path on a mount, not in this repository).
FILE_NAME = re.compile(
    r"(?<![\w/~.*-])((?:\.\./)+[\w./-]+|[\w.-]+(?:/[\w.-]+)*\.(?:md|py|toml|yaml|yml|sh|service|c|js|css|html))(?![\w/*-])"
)


def files_outside(text: str) -> list[str]:
    """The files ``text`` names that are not in this repository: any ``../`` path, a bare ``X.md`` that is
    neither at the top nor under docs/, a path under a top-level directory of the repository that does not exist."""
    top = {p.name for p in ROOT.iterdir() if p.is_dir() and not p.name.startswith(".")}
    out = []
    for name in FILE_NAME.findall(text):
        if name.startswith("../"):
            out.append(name)
        elif "/" not in name and name.endswith(".md"):
            if not (ROOT / name).exists() and not (ROOT / "docs" / name).exists():
                out.append(name)
        elif name.split("/")[0] in top and not (ROOT / name).exists():
            out.append(name)
    return out


@pytest.mark.parametrize("doc", documents())
def test_every_file_a_document_names_is_in_the_repository(doc: str) -> None:
    """The README pointed at ``../shared/DESIGN.md``, a file a clone of the repository does not have."""
    missing = files_outside((ROOT / doc).read_text())
    assert not missing, f"{doc} names files outside the repository: {missing}"


def test_the_file_check_sees_outside_and_missing_files() -> None:
    # DESIGN.md is docs/DESIGN.md since issue 39: a bare name found under docs/ is in the repository
    text = ("See `../shared/DESIGN.md`, PLAN.md 6b, `docs/NOPE.md`, `lakemount/nope.py`; DESIGN.md §4, "
            "`docs/SEMANTICS.md`, `scripts/import_map.py`, `cat /lake/demo/main~1/README.md`, /etc/lakemount/config.yaml")
    assert files_outside(text) == ["../shared/DESIGN.md", "PLAN.md", "docs/NOPE.md", "lakemount/nope.py"]


def test_the_check_sees_a_missing_name() -> None:
    functions, modules = _defined_tests()
    cited = named_tests("see `test_no_such_claim_checker_xyz` and tests/fuse/test_mount.py::test_mount_behaves_like_a_local_directory")
    assert cited == {"test_no_such_claim_checker_xyz", "test_mount", "test_mount_behaves_like_a_local_directory"}
    assert "test_no_such_claim_checker_xyz" not in functions | modules
    assert {"test_mount", "test_mount_behaves_like_a_local_directory"} <= functions | modules


# -- the commands, configuration snippets, keys and URIs the documents show ------------------
#
# A reader copies `lakemount ...` lines, YAML files and lakefs:// URIs out of the documents;
# each must still work with the code as it is.  Nothing runs: commands are parsed against
# click's command tree, snippets are loaded by the typed configuration.

FENCE = re.compile(r"^```([\w+-]*)[^\n]*\n(.*?)^```[ \t]*$", re.MULTILINE | re.DOTALL)
INLINE = re.compile(r"(?<!`)`([^`\n]+(?:\n[^`\n]+)?)`(?!`)")
SHELL_LANGUAGES = {"", "sh", "bash", "shell", "console", "text"}
# `lakemount` in command position: after environment assignments, `sudo`/`env`, or a path.
COMMAND_START = re.compile(r"^(?:[A-Za-z_][A-Za-z0-9_]*=\S*\s+)*(?:(?:sudo|env)(?:\s+-\S+)*\s+)?(?:\S*bin/)?lakemount(?:\s|$)")
REDIRECT = re.compile(r"^\d*(?:>>?|<|>&|&>)")
# Placeholders (REPO, <branch>, HOST:PORT, ...): never converted to the option's type.
PLACEHOLDER = re.compile(r"<[^>]+>|\b[A-Z]{2,}[A-Z0-9_]*\b|^[A-Z]$|\.\.\.")
URI = re.compile(r"lakefs://[^\s`'\")\]]+")


def fenced_blocks(text: str) -> list[tuple[str, str]]:
    """Every fenced code block as (language, body)."""
    return [(m.group(1).lower(), m.group(2)) for m in FENCE.finditer(text)]


def inline_spans(text: str) -> list[str]:
    """Every inline code span outside fenced blocks, its line breaks turned into spaces."""
    return [" ".join(m.group(1).split()) for m in INLINE.finditer(FENCE.sub("", text))]


def _split_line(line: str) -> list[str]:
    """A logical shell line cut into simple commands: at unquoted ``|``, ``;``, ``&`` and comments.

    Each ``$(...)`` is checked as commands of its own and stands as the word ``VALUE``.
    """
    segments: list[str] = []
    current: list[str] = []
    quote = ""
    i = 0
    while i < len(line):
        c = line[i]
        if quote:
            if c == quote:
                quote = ""
            elif c == "$" and quote == '"' and line.startswith("$(", i):
                i = _substitution(line, i, segments, current)
                continue
            current.append(c)
        elif c in "'\"":
            quote = c
            current.append(c)
        elif c == "#" and (i == 0 or line[i - 1].isspace()):
            break
        elif line.startswith("$(", i):
            i = _substitution(line, i, segments, current)
            continue
        elif c == "&" and (line[i - 1 : i] == ">" or line[i + 1 : i + 2] == ">"):
            current.append(c)  # 2>&1, &>file: a redirection, not a separator
        elif c in "|;&":
            segments.append("".join(current))
            current = []
        else:
            current.append(c)
        i += 1
    segments.append("".join(current))
    return [s.strip() for s in segments if s.strip()]


def _substitution(line: str, start: int, segments: list[str], current: list[str]) -> int:
    depth, i = 0, start + 1
    while i < len(line):
        depth += {"(": 1, ")": -1}.get(line[i], 0)
        if depth == 0:
            break
        i += 1
    for inner in _logical_lines(line[start + 2 : i]):
        segments.extend(_split_line(inner))
    current.append("VALUE")
    return i + 1


def _logical_lines(text: str) -> list[str]:
    """Lines with backslash continuations joined and ``$ `` prompts removed."""
    return [line.removeprefix("$ ") for line in re.sub(r"\\\n", " ", text).splitlines()]


def lakemount_commands(shell: str) -> list[list[str]]:
    """The arguments of every ``lakemount`` command in shell text (without ``lakemount`` itself).

    Environment assignments, ``sudo``/``env`` and redirections are dropped; a command
    whose quoting does not parse raises ``ValueError``.
    """
    found = []
    for line in _logical_lines(shell):
        for segment in _split_line(line):
            if not COMMAND_START.match(segment):
                continue
            words = shlex.split(segment)
            while not words[0].endswith("lakemount"):
                words.pop(0)
            argv: list[str] = []
            rest = iter(words[1:])
            for word in rest:
                if REDIRECT.match(word):
                    if REDIRECT.fullmatch(word) and not word.endswith("&"):
                        next(rest, None)  # `> FILE`: the target is no argument either
                    continue
                argv.append(word)
            found.append(argv)
    return found


def _uri_requirements(command: click.Command) -> dict[str, dict[str, bool]]:
    """Which parameters the command's callback reads as a URI, and with what ``parse_uri`` needs."""
    if command.callback is None:
        return {}
    source = textwrap.dedent(inspect.getsource(inspect.unwrap(command.callback)))
    out: dict[str, dict[str, bool]] = {}
    for node in ast.walk(ast.parse(source)):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.args
                and isinstance(node.args[0], ast.Name)):
            continue
        if node.func.id == "parse_uri":
            flags = {k.arg: bool(k.value.value) for k in node.keywords
                     if k.arg and k.arg != "path_hint" and isinstance(k.value, ast.Constant)}
            if any(k.arg == "path_hint" for k in node.keywords):
                flags["ref_only"] = True  # parse_uri refuses a path
            out[node.args[0].id] = flags
        elif node.func.id == "ref_of":
            out[node.args[0].id] = {"need_ref": True, "ref_only": True}
        elif node.func.id == "parse_repo_uri":
            out[node.args[0].id] = {"repo_only": True}
    return out


def _check_uri(
    text: str, need_ref: bool = False, need_path: bool = False, ref_only: bool = False, repo_only: bool = False
) -> str | None:
    try:
        uri = parse_repo_uri(text) if repo_only else parse_uri(text, need_ref=need_ref, need_path=need_path)
    except InvalidArgument as exc:
        return str(exc)
    if ref_only and uri.path:
        return f"expected a URI like lakefs://repo/ref without a path, got {text!r}"
    return None


_UNSET = getattr(click.core, "UNSET", None)  # click >= 8.3 marks an argument not given


def _values(value: object) -> list[str]:
    if value is None or value is _UNSET:
        return []
    if isinstance(value, list | tuple):
        return [v for item in value for v in _values(item)]
    return [str(value)]


def command_problems(argv: list[str], *, complete: bool) -> list[str]:
    """What is wrong with ``lakemount ARGV``: unknown verbs and options, and values of the wrong type.

    ``complete``: the text is a command to run (a code block), so missing arguments, missing
    required options, extra arguments and URIs of the wrong form count too; an inline mention
    (`lakemount gc run`) may leave them out.
    """
    command: click.Command = cli
    ctx = click.Context(cli, info_name="lakemount", **cli.context_settings)  # not resilient: that hides usage errors
    args = list(argv)
    while True:
        name = ctx.command_path
        try:
            opts, rest, _order = command.make_parser(ctx).parse_args(args=args)
        except click.UsageError as exc:
            return [f"{name}: {exc.format_message()}"]
        asked_help = any(p.name == "help" and opts.get(p.name) for p in command.get_params(ctx))
        problems = []
        uris = _uri_requirements(command)
        for param in command.get_params(ctx):
            values = _values(opts.get(param.name)) if param.name else []
            missing = not values and param.required and param.envvar is None
            if missing and complete and not asked_help:
                problems.append(f"{name}: missing {param.get_error_hint(ctx)}")
            for value in values:
                if PLACEHOLDER.search(value) or value == "VALUE":
                    continue
                if isinstance(param.type, click.Choice | click.types.IntParamType | click.types.FloatParamType | click.types.BoolParamType):
                    try:
                        param.type.convert(value, param, ctx)
                    except click.BadParameter as exc:
                        problems.append(f"{name}: {exc.format_message()}")
            if complete and param.name in uris:
                for value in values:
                    if value.startswith("lakefs://") and (problem := _check_uri(value, **uris[param.name])):
                        problems.append(f"{name} {param.get_error_hint(ctx)}: {problem}")
        if problems or asked_help:
            return problems
        if not isinstance(command, click.Group):
            if rest and complete:
                return [f"{name}: unexpected extra arguments {rest}"]
            return []
        if not rest:
            return []  # the group itself (`lakemount gc`): its help
        sub = command.get_command(ctx, rest[0])
        if sub is None:
            return [f"{name}: no such command {rest[0]!r}"]
        ctx = click.Context(sub, parent=ctx, info_name=rest[0], **sub.context_settings)  # as make_context does
        command, args = sub, rest[1:]


def documented_commands(doc: str) -> list[tuple[str, list[str], bool]]:
    """Every ``lakemount`` command a document shows: (where, argv, complete)."""
    text = (ROOT / doc).read_text()
    out = []
    for language, body in fenced_blocks(text):
        if language in SHELL_LANGUAGES:
            out += [("code block", argv, True) for argv in lakemount_commands(body)]
    for span in inline_spans(text):
        if COMMAND_START.match(span):
            out += [("inline", argv, False) for argv in lakemount_commands(span)]
        elif span.split()[0] in VERBS and " " in span:  # `fs cat`, `serve --no-api`: a verb by its name
            out += [("inline", argv, False) for argv in lakemount_commands("lakemount " + span)]
    return out


# Options in running text that are not lakemount's: rsync's, pytest's, and the words the
# mount's .lakefs/reset control file takes (docs/SEMANTICS.md).
FOREIGN_OPTIONS = {"--exclude", "-ra", "--all"}
OPTION_SPAN = re.compile(r"^(--?[a-z][a-z0-9-]*)(?:[ =]\S+)?$")


def cli_options() -> set[str]:
    """Every option of every lakemount command."""
    found: set[str] = set()
    pending: list[tuple[click.Command, click.Context]] = [(cli, click.Context(cli, info_name="lakemount", **cli.context_settings))]
    while pending:
        command, ctx = pending.pop()
        found |= {o for p in command.get_params(ctx) for o in (*p.opts, *p.secondary_opts) if o.startswith("-")}
        if isinstance(command, click.Group):
            for name in command.list_commands(ctx):
                sub = command.get_command(ctx, name)
                assert sub is not None
                pending.append((sub, click.Context(sub, parent=ctx, info_name=name)))
    return found


@pytest.mark.parametrize("doc", documents())
def test_every_option_a_document_names_exists(doc: str) -> None:
    """`--cache-size` or `--sweep MARK_ID` in running text must be an option of some lakemount command."""
    named = {m.group(1) for span in inline_spans((ROOT / doc).read_text()) if (m := OPTION_SPAN.match(span))}
    assert named - cli_options() - FOREIGN_OPTIONS == set(), f"{doc} names options no lakemount command has"


@pytest.mark.parametrize("doc", documents())
def test_every_documented_command_parses(doc: str) -> None:
    problems = []
    for where, argv, complete in documented_commands(doc):
        problems += [f"{where} `lakemount {shlex.join(argv)}`: {p}" for p in command_problems(argv, complete=complete)]
    assert not problems, f"{doc}:\n" + "\n".join(problems)


def test_the_documents_show_commands() -> None:
    seen = {doc: len(documented_commands(doc)) for doc in documents()}
    assert seen["README.md"] >= 30 and seen["docs/DEPLOYMENT.md"] >= 4, seen


def test_commands_are_found_in_shell_text() -> None:
    shell = (
        "lakemount fs ls lakefs://a/main/ | grep x   # a comment | lakemount nope\n"
        "LAKEMOUNT_HOME=/tmp/h sudo -E lakemount repo list && echo ok\n"
        "lakemount commit lakefs://a/main \\\n    -m 'two words'\n"
        'systemctl start "x@$(lakemount doctor --json).service"\n'
        "/usr/local/bin/lakemount log lakefs://a/main > log.txt 2>&1\n"
        "  worker 1: mount /lake      gateway: lakemount serve\n"
    )
    assert lakemount_commands(shell) == [
        ["fs", "ls", "lakefs://a/main/"],
        ["repo", "list"],
        ["commit", "lakefs://a/main", "-m", "two words"],
        ["doctor", "--json"],
        ["log", "lakefs://a/main"],
    ]
    assert inline_spans("run `lakemount actions runs list\nlakefs://s` or ```x``` `y`") == [
        "lakemount actions runs list lakefs://s", "y"
    ]


@pytest.mark.parametrize(
    ("argv", "complete", "expected"),
    [
        (["merge", "lakefs://a/b", "lakefs://a/main", "--strategy", "source-wins"], True, []),
        (["--config", "/etc/l.yaml", "doctor"], True, []),
        (["branch-protect", "add", "lakefs://REPO", "PATTERN", "-h"], True, []),
        (["gc"], True, []),
        (["gc", "run"], False, []),
        (["nope"], False, ["lakemount: no such command 'nope'"]),
        (["auth", "users", "nope"], False, ["lakemount auth users: no such command 'nope'"]),
        (["gc", "run", "lakefs://a", "--dry-runn"], False, ["lakemount gc run: No such option '--dry-runn'. Did you mean '--dry-run'?"]),
        (["pr", "close"], True, ["lakemount pr close: missing 'URI'", "lakemount pr close: missing 'PULL_ID'"]),
        (["pr", "merge", "lakefs://s", "1", "[--strategy", "source-wins]"], True,
         ["lakemount pr merge: unexpected extra arguments ['[--strategy', 'source-wins]']"]),
        (["pr", "merge", "lakefs://s", "1", "--strategy", "ours"], True,
         ["lakemount pr merge: Invalid value for '--strategy': 'ours' is not one of 'source-wins', 'dest-wins'."]),
        (["gc", "set-config", "lakefs://s", "--default-retention-days", "many"], True,
         ["lakemount gc set-config: Invalid value for '--default-retention-days': 'many' is not a valid integer."]),
        (["gc", "set-config", "lakefs://s", "--default-retention-days", "N"], True, []),
        (["gc", "set-config", "lakefs://s"], True, ["lakemount gc set-config: missing '--default-retention-days'"]),
        (["fs", "cat", "lakefs://s/main"], True,
         ["lakemount fs cat 'URI': expected a URI like lakefs://repo/ref/path, got 'lakefs://s/main'"]),
        (["fs", "cat", "lakefs://s/main"], False, []),
    ],
)
def test_the_command_check_sees_drift(argv: list[str], complete: bool, expected: list[str]) -> None:
    assert command_problems(argv, complete=complete) == expected


def test_uri_requirements_come_from_the_callbacks() -> None:
    group = cli.get_command(click.Context(cli), "fs")
    assert isinstance(group, click.Group)
    assert _uri_requirements(group.commands["cat"]) == {"uri": {"need_ref": True, "need_path": True}}
    assert _uri_requirements(cli.get_command(click.Context(cli), "cherry-pick")) == {  # type: ignore[arg-type]
        "branch": {"need_ref": True, "ref_only": True}, "commit": {"need_ref": True, "ref_only": True}
    }
    repo = cli.get_command(click.Context(cli), "repo")
    assert isinstance(repo, click.Group)
    assert _uri_requirements(repo.commands["delete"]) == {"uri": {"repo_only": True}}


SECTIONS = {f.name for f in dataclasses.fields(Config)} - {"home"}


def config_snippets(doc: str) -> list[str]:
    """The ```yaml blocks of a document that are lakemount configuration files (a top-level key is a section)."""
    import yaml

    out = []
    for language, body in fenced_blocks((ROOT / doc).read_text()):
        if language in ("yaml", "yml"):
            data = yaml.safe_load(body)
            if isinstance(data, dict) and SECTIONS & set(data):
                out.append(body)
    return out


@pytest.mark.parametrize("doc", documents())
def test_every_documented_configuration_loads(doc: str, tmp_path: pathlib.Path) -> None:
    for i, snippet in enumerate(config_snippets(doc)):
        path = tmp_path / f"{i}.yaml"
        path.write_text(snippet)
        try:
            config.load(str(path), env={"LAKEMOUNT_HOME": str(tmp_path)})
        except ConfigError as exc:
            pytest.fail(f"{doc}: a configuration example does not load: {exc}\n{snippet}")


def test_the_documents_show_configurations(tmp_path: pathlib.Path) -> None:
    assert len(config_snippets("docs/CONFIGURATION.md")) >= 1 and len(config_snippets("docs/DEPLOYMENT.md")) >= 1
    assert not config_snippets("README.md")  # its yaml is a hook file, not a configuration
    path = tmp_path / "x.yaml"
    path.write_text(config_snippets("docs/CONFIGURATION.md")[0].replace("region:", "regoin:"))
    with pytest.raises(ConfigError, match="unknown key 'blockstore.s3.regoin'"):
        config.load(str(path), env={"LAKEMOUNT_HOME": str(tmp_path)})


SECTION_NAMES = "|".join(sorted(SECTIONS))
KEY_MENTION = re.compile(rf"^((?:{SECTION_NAMES})\.[a-z0-9_.]*[a-z0-9_])(?::\s.*)?$")


@pytest.mark.parametrize("doc", documents())
def test_every_configuration_key_a_document_names_exists(doc: str) -> None:
    """`mount.head_ttl` or `api.metrics: false` in running text must name a key (or a section)."""
    known = set(config.schema())
    named = {m.group(1) for span in inline_spans((ROOT / doc).read_text()) if (m := KEY_MENTION.match(span))}
    assert named - known == set(), f"{doc} names configuration keys that do not exist"


def test_the_variables_that_are_not_keys_are_documented() -> None:
    """tests/test_config.py checks the keys' table and that every variable in use is known; this, the other way."""
    doc = (ROOT / "docs" / "CONFIGURATION.md").read_text()
    assert {v for v in config.OTHER_VARIABLES if f"`{v}`" not in doc} == set()


def test_mentions_of_keys_and_options_are_recognised() -> None:
    assert [m.group(1) for s in ("api.metrics: false", "mount.head_tll", "lakemount/cli", "cache") if (m := KEY_MENTION.match(s))] == [
        "api.metrics", "mount.head_tll"
    ]
    assert "mount.head_tll" not in config.schema()
    assert [m.group(1) for s in ("--sweep MARK_ID", "--exclude=/.lakefs", "rsync -a") if (m := OPTION_SPAN.match(s))] == [
        "--sweep", "--exclude"
    ]
    assert {"--sweep", "--cache-size", "-h", "--no-notify"} <= cli_options() and "--dry-runn" not in cli_options()


@pytest.mark.parametrize("doc", documents())
def test_every_documented_uri_parses(doc: str) -> None:
    text = (ROOT / doc).read_text()
    bad = [p for uri in URI.findall(text) if (p := _check_uri(uri.rstrip(".,;:")))]
    assert not bad, f"{doc}: {bad}"


def test_the_iceberg_examples_run_in_order_on_the_quickstarts_demo(tmp_path: pathlib.Path) -> None:
    """Issue 38 item 8: docs/ICEBERG.md's examples, one after another, on the ``demo`` repository that
    ``scripts/up.sh`` (``lakemount up``) creates (they collided: ``demo`` has a tag ``v1``).  Spark's is
    left to ``tests/iceberg/test_spark.py``, which runs them all in this order with Spark's among them:
    this module stays in the tier without a JVM or a mount."""
    from tests.iceberg_examples import SPARK_LEFT, run_in_order

    ran = run_in_order(tmp_path, spark=None)
    assert ran == ["pyiceberg", "commit", "tag", SPARK_LEFT, "duckdb", "audit"], ran


@pytest.mark.parametrize(("doc", "table"), [("docs/API.md", "api"), ("docs/ICEBERG.md", "iceberg")])
def test_the_route_tables_in_the_documents_are_the_served_ones(doc: str, table: str) -> None:
    """docs/API.md and docs/ICEBERG.md hold the route tables ``scripts/route_table.py`` prints from the code."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("route_table", ROOT / "scripts" / "route_table.py")
    assert spec is not None and spec.loader is not None
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    printed = script.TABLES[table]()
    assert printed.count("\n") > 20
    assert printed in (ROOT / doc).read_text(), (
        f"{doc}'s route table is not what the code serves: paste `.venv/bin/python scripts/route_table.py {table}`")
