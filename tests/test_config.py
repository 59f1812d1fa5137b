"""The typed configuration: defaults < file < environment, conversion, and one-line errors (issue 10)."""

from __future__ import annotations

import dataclasses
import pickle
import re
import subprocess
import sys
from pathlib import Path

import pytest

from lakemount import config as config_module
from lakemount.config import OTHER_VARIABLES, Config, keys, load, variable
from lakemount.errors import ConfigError, InvalidArgument

ROOT = Path(__file__).resolve().parent.parent


def _file(tmp_path: Path, text: str) -> str:
    path = tmp_path / "lakemount.yaml"
    path.write_text(text)
    return str(path)


def test_defaults_are_the_embedded_setup(tmp_path: Path) -> None:
    cfg = load(env={"LAKEMOUNT_HOME": str(tmp_path)})
    assert cfg.home == str(tmp_path)
    assert cfg.metadata.db.url == f"sqlite:///{tmp_path}/lakemount.db"
    assert cfg.blockstore.type == "local"
    assert cfg.blockstore.local.path == f"{tmp_path}/data"
    assert cfg.blockstore.s3.region == "" and cfg.blockstore.s3.max_attempts is None
    assert cfg.cache.dir == f"{tmp_path}/cache"
    assert cfg.cache.ram_bytes == 512 << 20 and cfg.cache.disk_bytes == 8 << 30
    assert cfg.mount.path == f"{tmp_path}/mnt" and cfg.mount.head_ttl == 1.0 and cfg.mount.read_ahead_kb == 1024
    assert cfg.gateways.s3.listen_address == "127.0.0.1:8000" and cfg.gateways.s3.flat is False
    assert cfg.logging.level == "INFO"
    assert cfg.auth.encrypt.secret_key == ""


def test_home_defaults_to_dot_lakemount(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    assert load(env={}).home == str(tmp_path / ".lakemount")


def test_file_overrides_defaults(tmp_path: Path) -> None:
    path = _file(
        tmp_path,
        "mount:\n  head_ttl: 0.5\n"
        "blockstore:\n  type: s3\n  default_namespace_prefix: s3://lake/lm\n  s3:\n    region: eu-west-1\n    max_attempts: 3\n"
        "gateways:\n  s3:\n    flat: true\n    aliases:\n      raw: demo/main\n",
    )
    cfg = load(path, env={"LAKEMOUNT_HOME": str(tmp_path)})
    assert cfg.mount.head_ttl == 0.5
    assert cfg.mount.read_ahead_kb == 1024  # untouched keys keep their defaults
    assert cfg.blockstore.type == "s3" and cfg.blockstore.s3.region == "eu-west-1"
    assert cfg.blockstore.s3.max_attempts == 3
    assert cfg.gateways.s3.flat is True
    assert cfg.gateways.s3.aliases == {"raw": "demo/main"}


def test_file_named_by_lakemount_config(tmp_path: Path) -> None:
    path = _file(tmp_path, "logging:\n  level: DEBUG\n")
    assert load(env={"LAKEMOUNT_HOME": str(tmp_path), "LAKEMOUNT_CONFIG": path}).logging.level == "DEBUG"


def test_environment_overrides_file(tmp_path: Path) -> None:
    path = _file(tmp_path, "mount:\n  head_ttl: 0.5\n  read_ahead_kb: 64\ncache:\n  ram_bytes: 1000\n")
    cfg = load(path, env={"LAKEMOUNT_HOME": str(tmp_path), "LAKEMOUNT_MOUNT_HEAD_TTL": "2.5"})
    assert cfg.mount.head_ttl == 2.5  # environment wins over the file
    assert cfg.mount.read_ahead_kb == 64  # the file wins over the default
    assert cfg.cache.ram_bytes == 1000


def test_empty_and_null_file_values_keep_defaults(tmp_path: Path) -> None:
    path = _file(tmp_path, "mount:\n  head_ttl:\ngateways:\n")
    cfg = load(path, env={"LAKEMOUNT_HOME": str(tmp_path)})
    assert cfg.mount.head_ttl == 1.0
    assert load(_file(tmp_path, ""), env={"LAKEMOUNT_HOME": str(tmp_path)}) == load(env={"LAKEMOUNT_HOME": str(tmp_path)})


@pytest.mark.parametrize(
    ("variable_name", "text", "read", "expected"),
    [
        ("LAKEMOUNT_CACHE_RAM_BYTES", "1048576", lambda c: c.cache.ram_bytes, 1048576),
        ("LAKEMOUNT_MOUNT_HEAD_TTL", "0.25", lambda c: c.mount.head_ttl, 0.25),
        ("LAKEMOUNT_MOUNT_HEAD_TTL", "3", lambda c: c.mount.head_ttl, 3.0),
        ("LAKEMOUNT_GATEWAYS_S3_FLAT", "true", lambda c: c.gateways.s3.flat, True),
        ("LAKEMOUNT_GATEWAYS_S3_FLAT", "1", lambda c: c.gateways.s3.flat, True),
        ("LAKEMOUNT_GATEWAYS_S3_FLAT", "Yes", lambda c: c.gateways.s3.flat, True),
        ("LAKEMOUNT_GATEWAYS_S3_FLAT", "false", lambda c: c.gateways.s3.flat, False),
        ("LAKEMOUNT_GATEWAYS_S3_FLAT", "0", lambda c: c.gateways.s3.flat, False),
        ("LAKEMOUNT_BLOCKSTORE_S3_FORCE_PATH_STYLE", "true", lambda c: c.blockstore.s3.force_path_style, True),
        ("LAKEMOUNT_BLOCKSTORE_S3_FORCE_PATH_STYLE", "", lambda c: c.blockstore.s3.force_path_style, None),
        ("LAKEMOUNT_BLOCKSTORE_S3_CONNECT_TIMEOUT", "1.5", lambda c: c.blockstore.s3.connect_timeout, 1.5),
        ("LAKEMOUNT_BLOCKSTORE_S3_CREDENTIALS_ACCESS_KEY_ID", "AK", lambda c: c.blockstore.s3.credentials.access_key_id, "AK"),
        ("LAKEMOUNT_GATEWAYS_S3_TLS_CERT_FILE", "/c.pem", lambda c: c.gateways.s3.tls.cert_file, "/c.pem"),
        ("LAKEMOUNT_GATEWAYS_S3_ALIASES", "raw=demo/main", lambda c: c.gateways.s3.aliases, "raw=demo/main"),
        ("LAKEMOUNT_METADATA_DB_URL", "postgresql://u@h/db", lambda c: c.metadata.db.url, "postgresql://u@h/db"),
    ],
)
def test_environment_text_is_converted(tmp_path: Path, variable_name: str, text: str, read, expected) -> None:  # type: ignore[no-untyped-def]
    value = read(load(env={"LAKEMOUNT_HOME": str(tmp_path), variable_name: text}))
    assert value == expected and type(value) is type(expected)


def test_file_values_are_converted(tmp_path: Path) -> None:
    path = _file(tmp_path, "cache:\n  ram_bytes: '4096'\n  disk_bytes: 1.0e+9\nmount:\n  head_ttl: 2\nblockstore:\n  s3:\n    region: 1\n")
    cfg = load(path, env={"LAKEMOUNT_HOME": str(tmp_path)})
    assert cfg.cache.ram_bytes == 4096 and cfg.cache.disk_bytes == 1_000_000_000
    assert cfg.mount.head_ttl == 2.0 and isinstance(cfg.mount.head_ttl, float)
    assert cfg.blockstore.s3.region == "1"


def _error(path: str | None, env: dict[str, str]) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        load(path, env=env)
    message = str(info.value)
    assert "\n" not in message
    assert isinstance(info.value, InvalidArgument)  # the CLI exits 2
    return info.value


def test_unknown_key_in_file_names_key_and_file(tmp_path: Path) -> None:
    path = _file(tmp_path, "mount:\n  head_tll: 3\n")
    err = _error(path, {"LAKEMOUNT_HOME": str(tmp_path)})
    assert str(err) == f"config: unknown key 'mount.head_tll' in {path} (did you mean 'mount.head_ttl'?)"
    assert (err.key, err.source) == ("mount.head_tll", path)


def test_unknown_section_in_file(tmp_path: Path) -> None:
    path = _file(tmp_path, "apis:\n  listen_address: 127.0.0.1:8001\n")
    assert str(_error(path, {"LAKEMOUNT_HOME": str(tmp_path)})).startswith(f"config: unknown key 'apis' in {path}")


def test_unknown_variable_is_named(tmp_path: Path) -> None:
    err = _error(None, {"LAKEMOUNT_HOME": str(tmp_path), "LAKEMOUNT_MOUNT_HEAD_TLL": "3"})
    assert str(err) == "config: unknown variable LAKEMOUNT_MOUNT_HEAD_TLL (did you mean LAKEMOUNT_MOUNT_HEAD_TTL?)"
    assert err.source == "LAKEMOUNT_MOUNT_HEAD_TLL"
    assert str(_error(None, {"LAKEMOUNT_GATEWAY_S3_WORKERS": "2"})).startswith(
        "config: unknown variable LAKEMOUNT_GATEWAY_S3_WORKERS"
    )


def test_variables_that_are_not_keys_are_left_alone(tmp_path: Path) -> None:
    env = {name: "x" for name in OTHER_VARIABLES}
    env["LAKEMOUNT_HOME"] = str(tmp_path)
    env["LAKEMOUNT_CONFIG"] = ""
    env["OTHER_TOOL_MOUNT_PATH"] = "/elsewhere"
    assert load(env=env) == load(env={"LAKEMOUNT_HOME": str(tmp_path)})


def test_every_lakemount_variable_used_in_the_repository_is_a_key_or_known() -> None:
    """Variables the code, tests, units and docs set or read must not be rejected as unknown."""
    import re

    found: set[str] = set()
    for top in ("lakemount", "tests", "scripts", "systemd", "docs", "benchmarks", "README.md"):
        base = ROOT / top
        for path in [base] if base.is_file() else base.rglob("*"):
            if path.is_file() and path.suffix in ("", ".py", ".md", ".sh", ".service", ".yaml", ".toml"):
                found |= set(re.findall(r"\bLAKEMOUNT_[A-Z0-9_]*[A-Z0-9]\b", path.read_text(errors="replace")))
    known = {variable(k) for k in keys()} | OTHER_VARIABLES
    examples = {"LAKEMOUNT_A_B_C", "LAKEMOUNT_MOUNT_HEAD_TLL", "LAKEMOUNT_GATEWAY_S3_WORKERS"}  # docs and these tests
    assert found - known - examples == set()


@pytest.mark.parametrize(
    ("variable_name", "text", "message"),
    [
        ("LAKEMOUNT_MOUNT_HEAD_TTL", "abc", "mount.head_ttl: expected a number, got 'abc' (from LAKEMOUNT_MOUNT_HEAD_TTL)"),
        ("LAKEMOUNT_CACHE_RAM_BYTES", "1.5", "cache.ram_bytes: expected an integer, got '1.5' (from LAKEMOUNT_CACHE_RAM_BYTES)"),
        ("LAKEMOUNT_GATEWAYS_S3_FLAT", "maybe", "gateways.s3.flat: expected true or false, got 'maybe' (from LAKEMOUNT_GATEWAYS_S3_FLAT)"),
        ("LAKEMOUNT_BLOCKSTORE_S3_MAX_ATTEMPTS", "x", "blockstore.s3.max_attempts: expected an integer, got 'x' (from LAKEMOUNT_BLOCKSTORE_S3_MAX_ATTEMPTS)"),
    ],
)
def test_wrong_type_in_environment(tmp_path: Path, variable_name: str, text: str, message: str) -> None:
    err = _error(None, {"LAKEMOUNT_HOME": str(tmp_path), variable_name: text})
    assert str(err) == "config: " + message


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("mount:\n  head_ttl: abc\n", "mount.head_ttl: expected a number, got 'abc'"),
        ("mount:\n  read_ahead_kb: true\n", "mount.read_ahead_kb: expected an integer, got True"),
        ("mount: 3\n", "mount: expected a section (a mapping), got 3"),
        ("mount:\n  path: [a, b]\n", "mount.path: expected a string, got a list"),
        ("gateways:\n  s3:\n    aliases: [a]\n", "gateways.s3.aliases: expected a mapping or a string, got a list"),
    ],
)
def test_wrong_type_in_file(tmp_path: Path, text: str, message: str) -> None:
    path = _file(tmp_path, text)
    assert str(_error(path, {"LAKEMOUNT_HOME": str(tmp_path)})) == f"config: {message} (from {path})"


def test_bad_yaml_is_one_line(tmp_path: Path) -> None:
    path = _file(tmp_path, "mount:\n  head_ttl: 1\n bad: [\n")
    err = _error(path, {"LAKEMOUNT_HOME": str(tmp_path)})
    assert str(err).startswith(f"config: {path} is not valid YAML: ")
    assert "(line " in str(err)


def test_file_not_a_mapping_and_missing_file(tmp_path: Path) -> None:
    path = _file(tmp_path, "- a\n- b\n")
    assert str(_error(path, {})) == f"config: {path} must hold a mapping of sections, got a list"
    missing = str(tmp_path / "nope.yaml")
    assert str(_error(missing, {})) == f"config: cannot read {missing}: No such file or directory"


def test_sections_are_frozen_dataclasses(tmp_path: Path) -> None:
    cfg = load(env={"LAKEMOUNT_HOME": str(tmp_path)})
    sections = [cfg]
    seen = 0
    while sections:
        section = sections.pop()
        assert dataclasses.is_dataclass(section)
        params = type(section).__dataclass_params__  # type: ignore[attr-defined]
        assert params.frozen, type(section)
        first = dataclasses.fields(section)[0].name
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(section, first, getattr(section, first))
        sections += [v for v in (getattr(section, f.name) for f in dataclasses.fields(section)) if dataclasses.is_dataclass(v)]
        seen += 1
    assert seen >= 15
    assert {f.name for f in dataclasses.fields(Config)} == {
        "home", "logging", "metadata", "blockstore", "gateways", "api", "cache", "mount", "auth", "actions", "pulls",
        "staging", "audit",
    }


def test_staging_backend_is_chosen_by_configuration(tmp_path: Path) -> None:
    from lakemount.app import App
    from lakemount.graveler.staging.lsm import LsmStaging
    from lakemount.metastore.sql_staging import SqlStaging

    def app(backend: str) -> App:
        return App(load(env={"LAKEMOUNT_HOME": str(tmp_path / backend), "LAKEMOUNT_STAGING_BACKEND": backend,
                             "LAKEMOUNT_STAGING_FLUSH_MS": "7.5", "LAKEMOUNT_STAGING_INLINE_BYTES": "1000"}))

    sql = app("sql")
    assert isinstance(sql.staging, SqlStaging) and sql.staging.refs is sql.metastore  # its own object, beside the refs
    assert sql.graveler.staging is sql.staging and sql.graveler.refs is sql.metastore
    lsm = app("lsm")
    assert isinstance(lsm.staging, LsmStaging) and lsm.staging.flush_ms == 7.5
    assert lsm.staging.inline_bytes == 1000
    assert lsm.graveler.staging is lsm.staging
    with pytest.raises(ConfigError, match=r"^config: staging.backend: expected sql or lsm, got 'rocks'$"):
        app("rocks").staging  # noqa: B018 - the property builds the backend


def test_config_pickles_and_hides_secrets_in_repr(tmp_path: Path) -> None:
    cfg = load(env={"LAKEMOUNT_HOME": str(tmp_path), "LAKEMOUNT_AUTH_ENCRYPT_SECRET_KEY": "s3cr3t-key",
                    "LAKEMOUNT_BLOCKSTORE_S3_SECRET_ACCESS_KEY": "s3cr3t-s3"})
    assert pickle.loads(pickle.dumps(cfg)) == cfg  # Spark tasks carry it to executors
    assert "s3cr3t" not in repr(cfg)
    assert cfg.auth.encrypt.secret_key == "s3cr3t-key"


def test_sections_round_trip_through_a_file(tmp_path: Path) -> None:
    import yaml

    cfg = load(env={"LAKEMOUNT_HOME": str(tmp_path), "LAKEMOUNT_GATEWAYS_S3_ALIASES": "raw=demo/main",
                    "LAKEMOUNT_BLOCKSTORE_S3_MAX_ATTEMPTS": "4"})
    path = _file(tmp_path, yaml.safe_dump(cfg.sections()))
    assert load(path, env={"LAKEMOUNT_HOME": str(tmp_path)}) == cfg


def test_variables_are_unique_per_key() -> None:
    names = [variable(k) for k in keys()]
    assert len(names) == len(set(names))
    assert config_module.schema()["mount.head_ttl"] is float


def test_documented_keys_are_exactly_the_implemented_ones() -> None:
    import re

    doc = (ROOT / "docs" / "CONFIGURATION.md").read_text()
    table = [line for line in doc.splitlines() if line.startswith("| `")]
    documented: set[str] = set()
    for line in table:
        cell = line.split("|")[1]
        names = re.findall(r"`([a-z0-9_.]+)`", cell)
        base = names[0].rsplit(".", 1)[0]
        documented |= {names[0], *(f"{base}.{n}" for n in names[1:])}
    assert documented == set(keys())


def test_cli_prints_a_config_error_as_one_line(tmp_path: Path) -> None:
    path = _file(tmp_path, "mount:\n  head_tll: 3\n")
    env = {"PATH": "/usr/bin:/bin", "LAKEMOUNT_HOME": str(tmp_path), "PYTHONPATH": str(ROOT)}
    r = subprocess.run([sys.executable, "-m", "lakemount.cli.main", "--config", path, "repo", "list"],
                       env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 2
    assert r.stderr == f"error: config: unknown key 'mount.head_tll' in {path} (did you mean 'mount.head_ttl'?)\n"
    r = subprocess.run([sys.executable, "-m", "lakemount.cli.main", "repo", "list"],
                       env={**env, "LAKEMOUNT_MOUNT_HEAD_TTL": "abc"}, capture_output=True, text=True, timeout=60)
    assert r.returncode == 2
    assert r.stderr == ("error: config: mount.head_ttl: expected a number, got 'abc' (from LAKEMOUNT_MOUNT_HEAD_TTL)\n")


def _sections() -> list[type]:
    return [cls for cls in vars(config_module).values() if isinstance(cls, type) and dataclasses.is_dataclass(cls)
            and cls.__module__ == config_module.__name__]


def _twin(cls: type) -> type:
    """``cls`` as ``dataclass`` itself generates it: the same fields, generated methods."""
    fields = [(f.name, f.type, dataclasses.field(default=f.default, default_factory=f.default_factory, repr=f.repr))
              for f in dataclasses.fields(cls)]
    return dataclasses.make_dataclass(cls.__name__, fields, frozen=True, slots=True)  # type: ignore[arg-type]


@pytest.mark.parametrize("cls", _sections(), ids=lambda cls: cls.__name__)
def test_a_section_behaves_as_its_generated_dataclass(cls: type) -> None:
    """The sections share __init__, __repr__, __eq__ and __hash__ (import time, issue 41): as generated ones do."""
    twin = _twin(cls)
    assert cls.__dataclass_params__.frozen and "__dict__" not in dir(cls)  # type: ignore[attr-defined]
    fields = dataclasses.fields(cls)
    required = {f.name: f"/{f.name}" for f in fields if f.default is dataclasses.MISSING
                and f.default_factory is dataclasses.MISSING}
    ours, theirs = cls(**required), twin(**required)
    assert repr(ours) == repr(theirs) and hash(ours) == hash(theirs)
    assert ours == cls(**required) and ours != theirs  # another class: not equal, as generated
    values = [getattr(ours, f.name) for f in fields]
    assert cls(*values) == ours and repr(cls(*values)) == repr(twin(*values))
    changed = dataclasses.replace(ours, **{fields[-1].name: "other"})
    assert changed != ours and getattr(changed, fields[-1].name) == "other"
    if fields[0].default_factory is not dataclasses.MISSING:  # a fresh default per instance, as generated
        assert getattr(cls(**required), fields[0].name) is not getattr(ours, fields[0].name)
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(ours, fields[0].name, "x")
    wrong: list[tuple[tuple[object, ...], dict[str, object]]] = [
        ((*values, 1), {}), ((), {"nope": 1}), ((values[0],), {fields[0].name: values[0]})]
    if required:
        wrong.append(((), {}))
    for args, kwargs in wrong:
        with pytest.raises(TypeError) as generated:
            twin(*args, **kwargs)
        with pytest.raises(TypeError, match=f"^{re.escape(str(generated.value))}$"):
            cls(*args, **kwargs)
