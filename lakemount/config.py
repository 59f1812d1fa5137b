"""Configuration: typed, frozen sections built from defaults < one YAML file < ``LAKEMOUNT_*`` variables.

Every section is a frozen dataclass (``cfg.mount.head_ttl``, ``cfg.blockstore.s3.region``);
every key ``a.b.c`` can be set in the file (``--config`` / ``LAKEMOUNT_CONFIG``) or by
the variable ``LAKEMOUNT_A_B_C``, whose text is converted to the key's type.  Defaults
are the embedded setup: SQLite and a local block store under ``LAKEMOUNT_HOME``
(default ``~/.lakemount``), services on loopback.  An unknown key, an unknown
``LAKEMOUNT_*`` variable, a value of the wrong type, or a file that is not YAML raise
:class:`~lakemount.errors.ConfigError` with one line naming the key and its source.
The variables in :data:`OTHER_VARIABLES` are not configuration keys and are left alone.
docs/CONFIGURATION.md lists every key; ``tests/test_config.py`` checks the rules.
"""

from __future__ import annotations

import dataclasses
import os
import types
import typing
from collections.abc import Mapping
from dataclasses import field
from typing import Any, Final

from lakemount.errors import ConfigError
from lakemount.records import setting

ENV_PREFIX: Final = "LAKEMOUNT_"

# LAKEMOUNT_* variables that are not configuration keys: they are read elsewhere
# and must never be rejected as unknown.
OTHER_VARIABLES: Final = frozenset(
    {
        "LAKEMOUNT_HOME",  # anchors the defaults (here)
        "LAKEMOUNT_CONFIG",  # the configuration file (here and the CLI's --config)
        "LAKEMOUNT_SPARK_MASTER",  # --master of gc run / import / export
        "LAKEMOUNT_DEBUG",  # the CLI shows an internal error's traceback
        "LAKEMOUNT_MOUNT_ARGS",  # systemd/lakemount-mount@.service
        "LAKEMOUNT_GATEWAY_ARGS",  # systemd/lakemount-gateway.service
        "LAKEMOUNT_API_ARGS",  # systemd/lakemount-api.service
        # knobs of the test suite
        "LAKEMOUNT_TEST_POSTGRES_URL",
        "LAKEMOUNT_TEST_PG_BIN",
        "LAKEMOUNT_MODEL_EXAMPLES",
        "LAKEMOUNT_KERNEL_MODEL_EXAMPLES",
        "LAKEMOUNT_KERNEL_MODEL_STEPS",
        "LAKEMOUNT_SPARK_S3A_DEBUG",
        "LAKEMOUNT_CHROMIUM",  # the browser the UI tests and ui_bench drive
        "LAKEMOUNT_UI_SCREENSHOTS",  # =docs: the UI tests save their screenshots under docs/screenshots/
        "LAKEMOUNT_TEST_WORKERS",  # scripts/test.sh: the pytest-xdist workers of its second pass (0: one plain run)
        "LAKEMOUNT_TEST_TIER",  # =fast, set by scripts/test.sh --fast: the state machines run fewer examples (tests/budget.py)
        "LAKEMOUNT_TEST_CPU",  # tests/cpu.py: each test's CPU and the processes it started, written to this file
    }
)


# -- the sections: frozen dataclasses, declared with ``setting`` (lakemount/records.py) --------
#
# A dataclass compiles its generated methods per class when this module is imported, which every
# start of every process pays (a CLI verb too, issue 41); ``setting`` makes the same frozen, slotted
# dataclass with shared methods, a shared ``__init__`` included (every section is made once, at start).


@setting(frozen=True, slots=True)
class LoggingConfig:
    """``logging``: the log level."""
    level: str = "INFO"


@setting(frozen=True, slots=True)
class DbConfig:
    """``metadata.db``: the database URL (empty: SQLite under ``LAKEMOUNT_HOME``)."""
    url: str = ""


@setting(frozen=True, slots=True)
class MetadataConfig:
    """``metadata``: where refs and staging live."""
    db: DbConfig = field(default_factory=DbConfig)


@setting(frozen=True, slots=True)
class LocalBlockConfig:
    """``blockstore.local``: the directory of the local block store (empty: under ``LAKEMOUNT_HOME``), and the
    directories imports may read and repositories may be stored in (None: the block store's directory;
    ``catalog/confinement.py``)."""
    path: str = ""
    import_roots: tuple[str, ...] | None = None
    namespace_roots: tuple[str, ...] | None = None


@setting(frozen=True, slots=True)
class S3CredentialsConfig:
    """lakeFS's nested form of the S3 credentials (``blockstore.s3.credentials.*``)."""

    access_key_id: str = ""
    secret_access_key: str = field(default="", repr=False)
    session_token: str = field(default="", repr=False)


@setting(frozen=True, slots=True)
class S3BlockConfig:
    """``blockstore.s3``: empty or None values mean boto3's default."""

    endpoint: str = ""
    region: str = ""
    access_key_id: str = ""
    secret_access_key: str = field(default="", repr=False)
    session_token: str = field(default="", repr=False)
    force_path_style: bool | None = None
    max_pool_connections: int | None = None
    connect_timeout: float | None = None
    read_timeout: float | None = None
    max_attempts: int | None = None
    disable_pre_signed: bool = False
    pre_signed_expiry: int = 900
    credentials: S3CredentialsConfig = field(default_factory=S3CredentialsConfig)


@setting(frozen=True, slots=True)
class BlockstoreConfig:
    """``blockstore``: the block store type (``local`` or ``s3``), default namespace prefix and per-type settings."""
    type: str = "local"
    default_namespace_prefix: str = ""
    local: LocalBlockConfig = field(default_factory=LocalBlockConfig)
    s3: S3BlockConfig = field(default_factory=S3BlockConfig)


@setting(frozen=True, slots=True)
class TlsConfig:
    """``gateways.s3.tls``: PEM certificate and key files; both set, the gateway serves HTTPS."""
    cert_file: str = ""
    key_file: str = ""


@setting(frozen=True, slots=True)
class S3GatewayConfig:
    """``gateways.s3``: the S3 gateway's address, virtual-host domains, region, workers, flat mode, threads, bucket aliases and TLS."""
    listen_address: str = "127.0.0.1:8000"
    domain_name: str = ""
    region: str = "us-east-1"
    workers: int = 0
    flat: bool = False
    threads: int = 32
    # A mapping ``bucket: repo/ref`` (file) or ``bucket=repo/ref,...`` (variable).
    aliases: str | Mapping[str, str] = ""
    tls: TlsConfig = field(default_factory=TlsConfig)


@setting(frozen=True, slots=True)
class GatewaysConfig:
    """``gateways``: the S3 gateway section."""
    s3: S3GatewayConfig = field(default_factory=S3GatewayConfig)


@setting(frozen=True, slots=True)
class PreviewConfig:
    """``api.preview``: the largest Parquet page (bytes, compressed or decoded) an object preview decodes."""
    max_page_bytes: int = 64 * 1024 * 1024


@setting(frozen=True, slots=True)
class ApiConfig:
    """``api``: the REST API server (0 workers: one per CPU, at most 4), whether it serves ``/metrics``, previews."""

    listen_address: str = "127.0.0.1:8001"
    workers: int = 0
    # Also switches the recording off in the workers of both servers.
    metrics: bool = True
    preview: PreviewConfig = field(default_factory=PreviewConfig)


@setting(frozen=True, slots=True)
class CacheConfig:
    """``cache``: the disk cache directory and the RAM and disk bounds in bytes (disk 0 disables the disk tier)."""
    dir: str = ""
    ram_bytes: int = 512 * 1024 * 1024
    disk_bytes: int = 8 * 1024 * 1024 * 1024


@setting(frozen=True, slots=True)
class MountConfig:
    """``mount``: where ``lakemount up`` mounts, the branch-head re-check interval (seconds), the read-ahead window (KiB),
    for a mount shared with other local users which lakemount user each of them is, and write-back's journal."""
    path: str = ""
    head_ttl: float = 1.0
    read_ahead_kb: int = 1024
    # A mapping ``local user name or uid: lakemount user id`` (file) or ``name=user,...`` (variable).
    users: str | Mapping[str, str] = ""
    # Write-back (fuse/writeback.py, docs/SEMANTICS.md): a close returns once the file is in the node's journal.
    writeback: bool = False
    journal_dir: str = ""  # empty: LAKEMOUNT_HOME/journal
    journal_bytes: int = 1 << 30
    journal_fsync: bool = False
    writeback_retry: float = 300.0
    # FUSE passthrough of write-only opens (fuse/passthrough.py): auto (when the kernel takes it), on, off.
    passthrough: str = "off"


@setting(frozen=True, slots=True)
class EncryptConfig:
    """``auth.encrypt``: the server key (empty: a key file under ``LAKEMOUNT_HOME``); secrets at rest and API tokens use keys derived from it."""
    secret_key: str = field(default="", repr=False)


@setting(frozen=True, slots=True)
class AuthConfig:
    """``auth``: authentication settings."""
    encrypt: EncryptConfig = field(default_factory=EncryptConfig)


# Cloud metadata services and link-local addresses: what a webhook in an action
# file (written by anyone who may write a branch) must not reach from the server.
DEFAULT_WEBHOOK_DENIED: Final = "169.254.0.0/16,fe80::/10,fd00:ec2::254/128,100.100.100.200/32"


@setting(frozen=True, slots=True)
class WebhookConfig:
    """``actions.webhook``: the networks webhooks may reach (comma-separated CIDRs; empty allowed: any not denied)
    and the longest timeout (seconds) an action file may give one."""
    allowed_networks: str = ""
    denied_networks: str = DEFAULT_WEBHOOK_DENIED
    max_timeout: float = 300.0


@setting(frozen=True, slots=True)
class HooksConfig:
    """``actions.hooks``: how many hooks one process runs at once, and how long (seconds) a hook waits for a turn."""
    max_running: int = 16
    max_wait: float = 30.0


@setting(frozen=True, slots=True)
class ActionsConfig:
    """``actions``: hooks (lakeFS actions) settings, and the most action files an event reads."""
    webhook: WebhookConfig = field(default_factory=WebhookConfig)
    hooks: HooksConfig = field(default_factory=HooksConfig)
    # Action files one event reads (each at most 1 MiB) from each ref it reads them at.
    max_files: int = 100


@setting(frozen=True, slots=True)
class PullsConfig:
    """``pulls``: the most comments one pull request takes (each up to 64 KiB)."""
    max_comments: int = 10_000


@setting(frozen=True, slots=True)
class StagingConfig:
    """``staging``: where uncommitted entries live (``sql``: rows in the ref store; ``lsm``: staging files on the
    block store, listed in the ref store), how long a write waits for an in-flight flush (ms), how many L1
    files a branch's staging gathers before they are compacted, and the largest L1 file kept in its list row
    instead of the block store (bytes; 0: none)."""
    backend: str = "sql"
    flush_ms: float = 20.0
    l1_max: int = 16
    inline_bytes: int = 32 * 1024


@setting(frozen=True, slots=True)
class AuditConfig:
    """``audit``: the audit trail (``lakemount/audit/``): on or off, how often each process writes its records
    (seconds, or as soon as this many wait), and how many days of partitions are kept (0: all)."""
    enabled: bool = True
    flush_s: float = 10.0
    flush_records: int = 10_000
    retention_days: int = 90


@setting(frozen=True, slots=True)
class Config:
    """The whole configuration; ``home`` is ``LAKEMOUNT_HOME`` (not a key), the rest are sections."""

    home: str
    logging: LoggingConfig = field(default_factory=LoggingConfig)
    metadata: MetadataConfig = field(default_factory=MetadataConfig)
    blockstore: BlockstoreConfig = field(default_factory=BlockstoreConfig)
    gateways: GatewaysConfig = field(default_factory=GatewaysConfig)
    api: ApiConfig = field(default_factory=ApiConfig)
    cache: CacheConfig = field(default_factory=CacheConfig)
    mount: MountConfig = field(default_factory=MountConfig)
    auth: AuthConfig = field(default_factory=AuthConfig)
    actions: ActionsConfig = field(default_factory=ActionsConfig)
    pulls: PullsConfig = field(default_factory=PullsConfig)
    staging: StagingConfig = field(default_factory=StagingConfig)
    audit: AuditConfig = field(default_factory=AuditConfig)

    def sections(self) -> dict[str, Any]:
        """Every key as nested plain data (what a configuration file holding all of them would say)."""
        out = dataclasses.asdict(self)
        del out["home"]
        return out


def defaults(home_dir: str) -> Config:
    """The built-in configuration: the embedded setup under ``home_dir``."""
    return Config(
        home=home_dir,
        metadata=MetadataConfig(DbConfig(url=f"sqlite:///{home_dir}/lakemount.db")),
        blockstore=BlockstoreConfig(local=LocalBlockConfig(path=f"{home_dir}/data")),
        cache=CacheConfig(dir=f"{home_dir}/cache"),
        mount=MountConfig(path=f"{home_dir}/mnt"),
    )


# -- the schema: dotted key -> type, derived from the dataclasses ----------------------


def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _schema(cls: type = Config, prefix: str = "") -> dict[str, Any]:
    """``{"mount.head_ttl": float, "blockstore.s3": S3BlockConfig, ...}``: every key and section."""
    out: dict[str, Any] = {}
    hints = _hints(cls)
    for f in dataclasses.fields(cls):
        if cls is Config and f.name == "home":
            continue
        key = prefix + f.name
        tp = hints[f.name]
        out[key] = tp
        if isinstance(tp, type) and dataclasses.is_dataclass(tp):
            out.update(_schema(tp, key + "."))
    return out


_SCHEMA: dict[str, Any] | None = None


def schema() -> dict[str, Any]:
    """Every dotted key (sections included) with its type; built once."""
    global _SCHEMA
    if _SCHEMA is None:
        _SCHEMA = _schema()
    return _SCHEMA


def variable(key: str) -> str:
    """The environment variable of a dotted key: ``mount.head_ttl`` -> ``LAKEMOUNT_MOUNT_HEAD_TTL``."""
    return ENV_PREFIX + key.upper().replace(".", "_")


def keys() -> list[str]:
    """Every settable key (no sections), in declaration order."""
    return [k for k, tp in schema().items() if not dataclasses.is_dataclass(tp)]


# -- conversion ---------------------------------------------------------------------------

_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")


def _shown(value: Any) -> str:
    if value is None:
        return "nothing"
    if isinstance(value, Mapping):
        return "a mapping"
    if isinstance(value, (list, tuple)):
        return "a list"
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _convert(value: Any, tp: Any, key: str, source: str) -> Any:
    """``value`` (text from a variable, or what YAML parsed) as type ``tp``; raises ``ConfigError``."""

    def bad(expected: str) -> ConfigError:
        return ConfigError(f"{key}: expected {expected}, got {_shown(value)} (from {source})", key, source)

    args = typing.get_args(tp)
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        if type(None) in args:  # optional: empty means "the default of whoever uses it"
            if value is None or (isinstance(value, str) and not value.strip()):
                return None
            (inner,) = [a for a in args if a is not type(None)]
            return _convert(value, inner, key, source)
        # str | Mapping[str, str]: the mapping-valued keys (gateways.s3.aliases, mount.users)
        if isinstance(value, str):
            return value
        if isinstance(value, Mapping) and all(not isinstance(v, (Mapping, list)) for v in value.values()):
            return {str(k): str(v) for k, v in value.items()}
        raise bad("a mapping or a string")
    if typing.get_origin(tp) is tuple:
        # A list of strings: a YAML list, or comma-separated text (a variable, or one string in the file).
        items = value.split(",") if isinstance(value, str) else value
        if not isinstance(items, (list, tuple)) or not all(isinstance(i, str) for i in items):
            raise bad("a list of strings")
        return tuple(i.strip() for i in items if i.strip())
    if tp is bool:
        if isinstance(value, bool):
            return value
        text = str(value).strip().lower() if isinstance(value, (str, int)) else None
        if text in _TRUE:
            return True
        if text in _FALSE:
            return False
        raise bad("true or false")
    if tp is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        if isinstance(value, float) and value.is_integer():
            return int(value)
        if isinstance(value, str):
            try:
                return int(value.strip())
            except ValueError:
                pass
        raise bad("an integer")
    if tp is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        if isinstance(value, str):
            try:
                return float(value.strip())
            except ValueError:
                pass
        raise bad("a number")
    if tp is str:
        if isinstance(value, str):
            return value
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return str(value)
        raise bad("a string")
    raise AssertionError(f"config key {key} has an unsupported type {tp!r}")


def _unknown(key: str, where: str, source: str) -> ConfigError:
    import difflib

    close = difflib.get_close_matches(key, list(schema()), n=1)
    hint = f" (did you mean '{close[0]}'?)" if close else ""
    return ConfigError(f"unknown key '{key}' {where}{hint}", key, source)


def _from_file(data: Mapping[Any, Any], path: str, prefix: str, out: dict[str, Any]) -> None:
    """Check the mapping ``data`` (a section, at ``prefix``) against the schema into ``out``."""
    known = schema()
    for raw_key, value in data.items():
        key = prefix + str(raw_key)
        tp = known.get(key)
        if tp is None:
            raise _unknown(key, f"in {path}", path)
        if dataclasses.is_dataclass(tp):
            if value is None:  # ``section:`` with nothing under it
                continue
            if not isinstance(value, Mapping):
                raise ConfigError(f"{key}: expected a section (a mapping), got {_shown(value)} (from {path})", key, path)
            _from_file(value, path, key + ".", out)
        elif value is not None:  # ``key:`` with no value keeps the default
            out[key] = _convert(value, tp, key, path)


def _read_file(path: str) -> dict[str, Any]:
    import yaml

    try:
        with open(path) as f:
            loaded = yaml.safe_load(f)
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror or exc}", source=path) from exc
    except yaml.YAMLError as exc:
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        mark = getattr(exc, "problem_mark", None)
        at = f" (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else ""
        raise ConfigError(f"{path} is not valid YAML: {problem}{at}", source=path) from exc
    if loaded is None:
        return {}
    if not isinstance(loaded, Mapping):
        raise ConfigError(f"{path} must hold a mapping of sections, got {_shown(loaded)}", source=path)
    out: dict[str, Any] = {}
    _from_file(loaded, path, "", out)
    return out


def _from_env(env: Mapping[str, str]) -> dict[str, Any]:
    names = sorted(name for name in env if name.startswith(ENV_PREFIX) and name not in OTHER_VARIABLES)
    if not names:  # the common case: no schema needed (building it evaluates every section's annotations)
        return {}
    by_variable = {variable(k): k for k in keys()}
    out: dict[str, Any] = {}
    for name in names:
        key = by_variable.get(name)
        if key is None:
            import difflib

            close = difflib.get_close_matches(name, list(by_variable), n=1)
            hint = f" (did you mean {close[0]}?)" if close else ""
            raise ConfigError(f"unknown variable {name}{hint}", name, name)
        out[key] = _convert(env[name], schema()[key], key, name)
    return out


def _build(base: Any, values: Mapping[str, Any], prefix: str = "") -> Any:
    changes: dict[str, Any] = {}
    for f in dataclasses.fields(base):
        if f.name == "home" and prefix == "":
            continue
        key = prefix + f.name
        current = getattr(base, f.name)
        if dataclasses.is_dataclass(current):
            built = _build(current, values, key + ".")
            if built is not current:
                changes[f.name] = built
        elif key in values:
            changes[f.name] = values[key]
    return dataclasses.replace(base, **changes) if changes else base


def load(path: str | None = None, env: Mapping[str, str] | None = None) -> Config:
    """The configuration: defaults < the file ``path`` (else ``LAKEMOUNT_CONFIG``) < ``LAKEMOUNT_*`` in ``env``.

    ``env`` defaults to ``os.environ``.  Raises ``ConfigError`` (an ``InvalidArgument``;
    one line naming the key and the file or variable) for an unreadable or invalid
    file, an unknown key or variable, or a value that is not of the key's type.
    """
    env = os.environ if env is None else env
    home_dir = os.path.abspath(os.path.expanduser(env.get("LAKEMOUNT_HOME", "~/.lakemount")))
    path = path or env.get("LAKEMOUNT_CONFIG")
    values = _read_file(path) if path else {}
    values.update(_from_env(env))
    return _build(defaults(home_dir), values)


def config_pipe(config: Config) -> int:
    """The read end of a pipe holding ``config`` as YAML, already complete (secrets never touch a file).

    The caller hands it to one child process (``--config /dev/fd/N`` with
    ``pass_fds``) and closes it.  Raises ``OSError`` if the configuration
    exceeds the largest pipe buffer the system allows
    (``/proc/sys/fs/pipe-max-size``, 1 MiB by default).
    """
    import fcntl

    import yaml

    text = yaml.safe_dump(config.sections(), sort_keys=True).encode()
    r, w = os.pipe()
    try:
        if len(text) > fcntl.fcntl(w, fcntl.F_GETPIPE_SZ):
            fcntl.fcntl(w, fcntl.F_SETPIPE_SZ, len(text))
        view = memoryview(text)
        while view:  # fits the buffer: never blocks
            view = view[os.write(w, view) :]
    except BaseException:
        os.close(r)
        raise
    finally:
        os.close(w)
    return r
