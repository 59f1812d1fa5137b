"""The Spark context of a lakemount process, and the translation of Spark failures.

PySpark allows one active ``SparkContext`` per process, so every job shares
the context built here: ``local[*]`` unless another master URL is asked for,
no web UI, few shuffle partitions (jobs partition their own data), executors
running this interpreter, and a log configuration that keeps the JVM quiet
but for errors.  The jobs use RDDs only, so they start a bare context
(``get_context``); a ``SparkSession`` (``get_spark``), whose start costs about
as much again, is built on it only when asked for.  What the JVM prints
before its log configuration applies (the launcher's module warnings,
"Using Spark's default log4j profile"...) is filtered out of its stderr
(``_forward``); everything else, errors included, still reaches ours.  An exception raised by lakemount code inside an executor
reaches the driver wrapped in a Java exception; :func:`translated` turns it
back into the lakemount error it was, so the command line can print its one
line and exit with the right status.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import socket
import sys
import tempfile
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, Final

from lakemount import errors
from lakemount.errors import LakeMountError, Unavailable

if TYPE_CHECKING:
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

DEFAULT_MASTER: Final = "local[*]"
SHUFFLE_PARTITIONS: Final = 8

_LOG4J2: Final = """\
# The root stays at WARN, the level PySpark's shell mode expects (otherwise it
# announces a level change); the console appender lets errors through only.
rootLogger.level = warn
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n
appender.console.filter.threshold.type = ThresholdFilter
appender.console.filter.threshold.level = error
logger.shutdown.name = org.apache.spark.util.ShutdownHookManager
logger.shutdown.level = off
"""

# Lines of the JVM's stderr that tell a user of `lakemount import` or `gc run` nothing: printed by the
# java launcher or by Spark before our log configuration applies, whatever the log level.
_NOISE: Final = re.compile(
    rb"WARNING: Using incubator modules"
    rb"|WARNING: (An )?[Ii]llegal reflective access|WARNING: Please consider reporting this to the maintainers"
    rb"|WARNING: Use --illegal-access=warn|WARNING: All illegal access operations will be denied"
    rb"|Using Spark's default log4j profile"
    rb"|WARN NativeCodeLoader: Unable to load native-hadoop library"
    rb"|Setting default log level to|To adjust logging level use sc\.setLogLevel"
    rb"|WARN Utils: (Your hostname, .* resolves to a loopback address|Set SPARK_LOCAL_IP if you need)"
)

_lock = threading.Lock()
_context: SparkContext | None = None
_session: SparkSession | None = None
_master: str | None = None


def _log_config() -> str:
    path = os.path.join(tempfile.gettempdir(), f"lakemount-log4j2-{os.getuid()}.properties")
    try:
        with open(path) as f:
            if f.read() == _LOG4J2:
                return path
    except OSError:
        pass
    fd, tmp = tempfile.mkstemp(prefix="lakemount-log4j2-", dir=os.path.dirname(path))
    with os.fdopen(fd, "w") as f:
        f.write(_LOG4J2)
    os.replace(tmp, path)
    return path


def _hostname_resolves() -> bool:
    """Whether this machine's own name resolves (Spark's driver asks for it at start-up)."""
    try:
        socket.gethostbyname(socket.gethostname())
    except OSError:
        return False
    return True


def running() -> bool:
    """Whether this process has a Spark context up (a job then costs no start-up)."""
    return _context is not None


def get_context(master: str | None = None) -> SparkContext:
    """The process's Spark context, built on first use.

    ``master`` None means "whatever is running, else ``local[*]``".  Asking for
    a different master than the running context's stops it and starts anew
    (one context per process).  Raises ``Unavailable`` when Spark cannot start
    (no Java, no PySpark).
    """
    with _lock:
        return _context_locked(master)


def get_spark(master: str | None = None) -> SparkSession:
    """A ``SparkSession`` on the process's context (see :func:`get_context`), for DataFrame work."""
    global _session
    with _lock:
        _context_locked(master)
        if _session is None:
            from pyspark.sql import SparkSession

            _session = SparkSession.builder.getOrCreate()  # adopts the running context
        return _session


def _context_locked(master: str | None) -> SparkContext:
    global _context, _master
    if _context is not None:
        if master is None or master == _master:
            return _context
        _stop_locked()
    want = master or DEFAULT_MASTER
    try:
        from pyspark import SparkConf, SparkContext
    except ImportError as exc:  # pragma: no cover - pyspark is a dependency
        raise Unavailable("PySpark is not installed: pip install pyspark") from exc
    # Executors must run this interpreter, which has lakemount installed.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    java_opts = f"-Dlog4j2.configurationFile=file:{_log_config()}"
    conf = (
        SparkConf()
        .setMaster(want)
        .setAppName("lakemount")
        .set("spark.ui.enabled", "false")
        .set("spark.ui.showConsoleProgress", "false")
        .set("spark.sql.shuffle.partitions", str(SHUFFLE_PARTITIONS))
        .set("spark.python.worker.reuse", "true")
        .set("spark.pyspark.python", sys.executable)
        .set("spark.driver.extraJavaOptions", java_opts)
        .set("spark.executor.extraJavaOptions", java_opts)
    )
    if want.startswith("local") and not _hostname_resolves():
        # A container or chroot whose hostname is in no /etc/hosts: the JVM dies
        # at start-up looking itself up ("Java gateway process exited").  A local
        # master needs no address but loopback.
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        conf = conf.set("spark.driver.host", "127.0.0.1").set("spark.driver.bindAddress", "127.0.0.1")
    # PySpark's py4j converters import pyspark.testing, which warns about pandas 3 (jobs use no pandas).
    warnings.filterwarnings("ignore", message="PySpark does not yet fully support pandas", category=FutureWarning)

    def create() -> SparkContext:
        # One JVM gateway per process: a context started after a stop reuses it.
        gateway = None if SparkContext._gateway is not None else _launch_gateway(conf)
        return SparkContext(conf=conf, gateway=gateway)

    sc = _start(create, want)
    sc.setLogLevel("ERROR")
    _context, _master = sc, want
    return sc


def _launch_gateway(conf: Any) -> Any:
    """Start the JVM with its stderr piped through :func:`_forward`."""
    from pyspark.java_gateway import launch_gateway

    read_fd, write_fd = os.pipe()
    try:
        gateway = launch_gateway(conf, popen_kwargs={"stderr": write_fd})
    except BaseException:
        os.close(read_fd)
        raise
    finally:
        os.close(write_fd)  # the JVM holds its end; EOF once it exits
    threading.Thread(target=_forward, args=(read_fd,), name="lakemount-jvm-stderr", daemon=True).start()
    return gateway


def _forward(fd: int) -> None:
    """Copy the JVM's stderr to ours line by line, leaving out the ``_NOISE`` lines (until the JVM exits)."""
    with os.fdopen(fd, "rb") as lines:
        for line in lines:
            if not _NOISE.search(line):
                with contextlib.suppress(OSError):
                    os.write(2, line)


def _start(create: Callable[[], SparkContext], want: str) -> SparkContext:
    """``create()`` in a helper thread, so that Ctrl-C meanwhile is a clean ``Interrupted``.

    Created in the main thread, a SparkContext installs a SIGINT handler that
    raises KeyboardInterrupt inside py4j calls (py4j logs it as a traceback);
    created elsewhere it installs none, and :func:`interruptible` handles Ctrl-C.
    """
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["context"] = create()
        except Exception as exc:  # py4j/JVM start-up failures have no common base class
            box["error"] = exc

    thread = threading.Thread(target=run, name="lakemount-spark-start", daemon=True)
    thread.start()
    try:
        while thread.is_alive():
            thread.join(0.2)
    except KeyboardInterrupt:
        raise Interrupted("interrupted while Spark was starting: nothing was done") from None
    if "error" in box:
        raise Unavailable(f"cannot start Spark (master {want}): {box['error']}") from box["error"]
    return box["context"]  # type: ignore[no-any-return]


def stop_spark() -> None:
    """Stop the process's context (tests and benchmarks that switch masters)."""
    with _lock:
        _stop_locked()


def _stop_locked() -> None:
    global _context, _session, _master
    if _session is not None:
        _session.stop()
    elif _context is not None:
        _context.stop()
    _context, _session, _master = None, None, None


def parallelism(sc: SparkContext) -> int:
    """How many tasks to split a job into: Spark's default parallelism, at least 1."""
    return max(1, int(sc.defaultParallelism))


_REMOTE_ERROR = re.compile(r"lakemount\.errors\.(\w+): ([^\n]*)")


@contextlib.contextmanager
def translated() -> Iterator[None]:
    """Re-raise a lakemount error thrown inside an executor as itself (by category).

    Anything else Spark throws becomes ``Unavailable`` with its first line.
    """
    try:
        yield
    except LakeMountError:
        raise
    except Exception as exc:
        name = type(exc).__name__
        if name not in ("Py4JJavaError", "PythonException", "Py4JError", "SparkException") and not type(
            exc
        ).__module__.startswith(("py4j", "pyspark")):
            raise
        text = str(exc)
        found = _REMOTE_ERROR.findall(text)
        if found:
            cls_name, message = found[-1]
            cls = getattr(errors, cls_name, None)
            if isinstance(cls, type) and issubclass(cls, LakeMountError):
                raise errors.category_of(_bare(cls))(message) from exc
        first = next((ln.strip() for ln in text.splitlines() if ln.strip()), name)
        raise Unavailable(f"Spark job failed: {first[:500]}") from exc


def _cancel_all(sc: SparkContext) -> None:
    with contextlib.suppress(Exception):
        sc.cancelAllJobs()


class Interrupted(KeyboardInterrupt):
    """Ctrl-C stopped a Spark job; the message says what the job left behind and how to finish it."""


@contextlib.contextmanager
def interruptible(sc: SparkContext, left: str) -> Iterator[threading.Event]:
    """Run Spark jobs so that Ctrl-C (SIGINT) cancels them and raises ``Interrupted(left)``.

    PySpark's own handler raises ``KeyboardInterrupt`` in the middle of a py4j
    socket read, which py4j logs as a traceback.  Here the first SIGINT only
    cancels the jobs (the blocked call then returns with a cancellation), a
    second one stops waiting.  Wrap it around ``translated()``.  The block gets
    the event the first SIGINT sets: a block that runs several jobs checks it
    (or calls :func:`check_interrupted`) before starting the next one, since a
    Ctrl-C between two jobs has nothing to cancel.  Outside the main thread
    signals cannot be handled: the block just runs (and the event stays clear).
    """
    if threading.current_thread() is not threading.main_thread():
        yield threading.Event()
        return
    hit = threading.Event()

    def on_sigint(_signum: int, _frame: object) -> None:
        if hit.is_set():
            raise Interrupted(left)
        hit.set()
        # From another thread: this one is inside a py4j call (pinned-thread mode gives each thread its own connection).
        threading.Thread(target=_cancel_all, args=(sc,), name="lakemount-cancel", daemon=True).start()

    previous = signal.signal(signal.SIGINT, on_sigint)
    try:
        yield hit
    except Interrupted:
        raise
    except BaseException as exc:
        if hit.is_set():
            raise Interrupted(left) from exc
        raise
    finally:
        signal.signal(signal.SIGINT, previous)
    if hit.is_set():  # the job ended before the cancellation reached it: still honour the Ctrl-C
        raise Interrupted(left)


def check_interrupted(hit: threading.Event | None) -> None:
    """Inside :func:`interruptible`: stop (it raises ``Interrupted``) if Ctrl-C came before the next job starts."""
    if hit is not None and hit.is_set():
        raise KeyboardInterrupt


def _bare(cls: type[LakeMountError]) -> LakeMountError:
    """An instance of ``cls`` without running its (data-carrying) constructor."""
    return cls.__new__(cls)


class Progress:
    """A progress bar on stderr fed by a Spark accumulator or by task counts.

    Shown only when stderr is a terminal; ``with Progress(...)`` polls in a
    background thread while the block runs a job.
    """

    def __init__(
        self, sc: SparkContext, desc: str, *, unit: str = "obj", total: int | None = None,
        counter: Callable[[], int] | None = None, enabled: bool | None = None,
    ) -> None:
        self.sc = sc
        self.desc = desc
        self.unit = unit
        self.total = total
        self.counter = counter
        self.enabled = sys.stderr.isatty() if enabled is None else enabled
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._bar: Any = None

    def __enter__(self) -> Progress:
        if self.enabled:
            from tqdm import tqdm

            self._bar = tqdm(total=self.total, desc=self.desc, unit=self.unit, file=sys.stderr, leave=False)
            self._thread = threading.Thread(target=self._poll, name="lakemount-progress", daemon=True)
            self._thread.start()
        return self

    def _value(self) -> int:
        if self.counter is not None:
            return int(self.counter())
        tracker = self.sc.statusTracker()
        done = 0
        for sid in tracker.getActiveStageIds():
            info = tracker.getStageInfo(sid)
            if info is not None:
                done += info.numCompletedTasks
        return done

    def _poll(self) -> None:
        while not self._stop.wait(0.5):
            with contextlib.suppress(Exception):
                value = self._value()
                self._bar.update(max(0, value - self._bar.n))

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        if self._bar is not None:
            self._bar.close()


def timed(out: dict[str, float], name: str) -> contextlib.AbstractContextManager[None]:
    """Record the wall time of a block in ``out[name]`` (seconds)."""

    @contextlib.contextmanager
    def block() -> Iterator[None]:
        start = time.monotonic()
        try:
            yield
        finally:
            out[name] = round(out.get(name, 0.0) + time.monotonic() - start, 3)

    return block()
