"""A cluster of "hosts" on one machine: a network namespace and a private mount namespace each.

Every host is an anchor process (``sleep``) started by ``ip netns exec NS unshare
-m --propagation private``: it holds a network namespace with its own 10.x
address on a veth pair plugged into a bridge, and a mount namespace of its own,
so a FUSE mount made there (``/lake``) is seen by that host's processes only.
Commands run in a host with ``nsenter -t ANCHOR -m -n -r -w`` (``-r -w``: in the anchor's
root and working directories; entering a mount namespace otherwise resets them to the namespace's,
which escapes a chroot such as a debootstrap tree).  When the anchor and
its processes die the mount namespace and its mounts go with it, so a killed
test leaves no mount behind.

:class:`Cluster` is a context manager, bounded in time (``deadline``), and torn
down even on failure: on exit, from ``atexit`` and on SIGTERM.  Everything it
creates carries the prefix ``lmc`` plus a per-run id, and ``/run/lakemount-cluster/<id>``
names the owning process; :func:`remove_stale` deletes what a killed run left
(namespaces, links, processes in them), never the cluster of a live process.

Roles: ``db`` runs PostgreSQL (``initdb``/``pg_ctl``, listening on its
address), ``s3`` a moto server; ``add_mount`` starts ``lakemount mount /lake``
on a host with its own ``LAKEMOUNT_HOME`` and cache.  Root is required (ip netns,
FUSE); :func:`available` says why not when it is missing.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

PREFIX = "lmc"
PG_BIN = Path(os.environ.get("LAKEMOUNT_TEST_PG_BIN", "/usr/lib/postgresql/15/bin"))
REPO_ROOT = Path(__file__).resolve().parents[2]
PYTHON = sys.executable
S3_KEY, S3_SECRET, S3_BUCKET = "testing", "testing", "lake"


def available() -> str | None:
    """``None`` if clusters can be built here, else the reason."""
    if os.geteuid() != 0:
        return "needs root (ip netns, veth, FUSE in other mount namespaces)"
    for tool in ("ip", "unshare", "nsenter", "runuser"):
        if shutil.which(tool) is None:
            return f"{tool} not installed"
    if not (PG_BIN / "initdb").exists():
        return f"PostgreSQL server binaries not found in {PG_BIN}"
    if not os.path.exists("/dev/fuse"):
        return "/dev/fuse missing"
    return None


def _run(*cmd: str, check: bool = True, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(cmd), capture_output=True, text=True, check=check, timeout=timeout)


def fuse_mounts(pid: int | str = "self") -> list[str]:
    """The FUSE mountpoints in the mount namespace of process ``pid``, in mount order (fusectl left out)."""
    points = []
    with open(f"/proc/{pid}/mountinfo") as f:
        for line in f:
            fields, _, rest = line.partition(" - ")
            fstype = rest.split(" ", 1)[0]
            if fstype in ("fuse", "fuseblk") or fstype.startswith("fuse."):
                points.append(re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), fields.split()[4]))
    return points


def drop_copied_fuse_mounts(pid: int) -> list[str]:
    """Lazily unmount, inside the mount namespace of ``pid`` (a host's anchor), the FUSE mounts ``unshare -m``
    copied into it from ours; returns them.  Such a copy holds the mount's FUSE connection: a
    ``fusermount3 -u`` of it out here detaches only our namespace's, the kernel sends its process no
    DESTROY, and the process serves the copy, alive, until the host goes (stop 55: other sessions' Spark
    mounts outlived their unmount while a cluster test ran).  Mounts a host makes later are its own."""
    copied = fuse_mounts(pid)
    for point in reversed(copied):  # the deepest first
        _run("nsenter", "-t", str(pid), "-m", "umount", "-l", point, check=False)
    return copied


RUN_DIR = Path("/run/lakemount-cluster")  # <id> -> pid of the process that owns cluster <id>


def _owner_alive(cluster_id: str) -> bool:
    try:
        pid = int((RUN_DIR / cluster_id).read_text())
        os.kill(pid, 0)
    except (OSError, ValueError):
        return False
    return True


def remove_stale(prefix: str = PREFIX) -> list[str]:
    """Delete namespaces and links of clusters whose owning process died; returns what was removed.

    Clusters of live processes (another test session on this machine) are left alone.
    """
    return _remove(prefix, only_dead=True)


def _remove(prefix: str, *, only_dead: bool) -> list[str]:
    removed = []

    def mine(name: str) -> bool:
        if not name.startswith(prefix):
            return False
        return not only_dead or not _owner_alive(name[len(PREFIX) : len(PREFIX) + 4])

    out = _run("ip", "netns", "list", check=False).stdout
    for line in out.splitlines():
        name = line.split()[0] if line.split() else ""
        if not name.startswith(PREFIX) or "-" not in name or not mine(name):
            continue
        pids = _run("ip", "netns", "pids", name, check=False).stdout.split()
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, ValueError):
                os.kill(int(pid), signal.SIGKILL)
        _run("ip", "netns", "delete", name, check=False)
        removed.append(name)
    for line in _run("ip", "-o", "link", "show", check=False).stdout.splitlines():
        parts = line.split(":")
        if len(parts) > 1:
            ifname = parts[1].strip().split("@")[0]
            if mine(ifname) and len(ifname) <= 15:
                _run("ip", "link", "delete", ifname, check=False)
                removed.append(ifname)
    if only_dead:
        for f in RUN_DIR.glob("*") if RUN_DIR.exists() else ():
            if not _owner_alive(f.name):
                f.unlink(missing_ok=True)
    return removed


@dataclass
class Host:
    """One host: its namespace, address, anchor process and the processes started on it."""

    cluster: Cluster
    name: str
    ns: str
    ip: str
    veth: str
    anchor: subprocess.Popen[bytes]
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)
    home: str = ""

    def cmd(self, *argv: str) -> list[str]:
        """``argv`` as run inside this host (its network and mount namespaces)."""
        return ["nsenter", "-t", str(self.anchor.pid), "-m", "-n", "-r", "-w", "--", *argv]

    def run(self, *argv: str, timeout: float = 60, check: bool = True, env: dict[str, str] | None = None,
            input: str | bytes | None = None, text: bool = True) -> subprocess.CompletedProcess[Any]:
        """Run ``argv`` on this host and wait; raises ``CalledProcessError`` (with output) when ``check``."""
        p = subprocess.run(self.cmd(*argv), capture_output=True, text=text, timeout=timeout, env=env, input=input)
        if check and p.returncode != 0:
            tail = p.stderr if isinstance(p.stderr, str) else p.stderr.decode(errors="replace")
            raise RuntimeError(f"on {self.name}: {quote(argv)} exited {p.returncode}: {tail.strip()[-1500:]}")
        return p

    def spawn(self, *argv: str, env: dict[str, str] | None = None, log: str | None = None) -> subprocess.Popen[bytes]:
        """Start ``argv`` on this host in the background; it is killed at teardown."""
        out = open(log or os.devnull, "ab")  # noqa: SIM115 (closed with the process)
        try:
            p = subprocess.Popen(self.cmd(*argv), stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env)
        finally:
            out.close()
        self.procs.append(p)
        return p

    def python(self, code: str, *args: str, timeout: float = 60, env: dict[str, str] | None = None) -> str:
        """Run Python ``code`` on this host; returns its stdout."""
        return self.run(PYTHON, "-c", code, *args, timeout=timeout, env=env or self.cluster.env(self)).stdout

    def lakemount(self, *args: str, timeout: float = 60, check: bool = True) -> subprocess.CompletedProcess[str]:
        """Run the ``lakemount`` CLI on this host with the cluster's configuration."""
        return self.run(PYTHON, "-m", "lakemount.cli.main", *args, timeout=timeout, check=check, env=self.cluster.env(self))

    def read(self, path: str, timeout: float = 30) -> bytes:
        return self.run("cat", path, timeout=timeout, text=False).stdout

    def link(self, up: bool) -> None:
        """Plug (``True``) or cut (``False``) this host's network link."""
        _run("ip", "link", "set", self.veth, "up" if up else "down")


class Cluster:
    """Hosts on a bridge, plus the shared stores; use as a context manager."""

    def __init__(self, *, deadline: float = 600, net: int | None = None, durable: bool = False) -> None:
        self.id = uuid.uuid4().hex[:4]
        self.prefix = f"{PREFIX}{self.id}"
        self.bridge = f"{self.prefix}br"
        self.net = net if net is not None else 100 + int(self.id, 16) % 100
        self.hosts: dict[str, Host] = {}
        self.dir = Path(tempfile.mkdtemp(prefix=f"{self.prefix}-"))
        self.dir.chmod(0o755)  # the postgres user walks into it
        self.deadline = time.monotonic() + deadline
        self.db_url = ""
        self.s3_endpoint = ""
        self._pg_data = ""
        self.durable = durable  # PostgreSQL with fsync and synchronous commit, for tests that crash it
        self.secret_key = uuid.uuid4().hex + uuid.uuid4().hex  # auth.encrypt.secret_key shared by every host
        self._closed = False
        self._spark: list[subprocess.Popen[bytes]] = []
        self._spark_hosts: list[Host] = []
        self._spark_runs = 0
        self._prev_term: Any = None

    # -- lifecycle -----------------------------------------------------------------
    def __enter__(self) -> Cluster:
        atexit.register(self.close)
        RUN_DIR.mkdir(parents=True, exist_ok=True)
        (RUN_DIR / self.id).write_text(str(os.getpid()))
        self._prev_term = signal.getsignal(signal.SIGTERM)
        with contextlib.suppress(ValueError):  # not the main thread
            signal.signal(signal.SIGTERM, self._on_term)
        try:
            _run("ip", "link", "add", self.bridge, "type", "bridge")
            _run("ip", "link", "set", self.bridge, "up")
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _on_term(self, signum: int, frame: Any) -> None:
        self.close()
        raise SystemExit(128 + signum)

    def left(self) -> float:
        """Seconds left before the deadline; raises ``TimeoutError`` when it passed."""
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("cluster deadline passed")
        return left

    def close(self) -> None:
        """Kill every process, drop namespaces, links and files (idempotent, never raises)."""
        if self._closed:
            return
        self._closed = True
        for host in self.hosts.values():
            for p in reversed(host.procs):
                if p.poll() is None:
                    with contextlib.suppress(Exception):
                        p.send_signal(signal.SIGTERM)
            for p in reversed(host.procs):
                with contextlib.suppress(Exception):
                    p.wait(5)
                if p.poll() is None:
                    with contextlib.suppress(Exception):
                        p.kill()
                        p.wait(5)
        if self._pg_data:
            with contextlib.suppress(Exception):
                _run("runuser", "-u", "postgres", "--", str(PG_BIN / "pg_ctl"), "-D", self._pg_data, "-m", "immediate", "stop", check=False)
        for host in self.hosts.values():
            with contextlib.suppress(Exception):
                host.anchor.kill()
                host.anchor.wait(5)
        _remove(self.prefix, only_dead=False)
        (RUN_DIR / self.id).unlink(missing_ok=True)
        shutil.rmtree(self.dir, ignore_errors=True)
        with contextlib.suppress(Exception):
            atexit.unregister(self.close)
        if self._prev_term is not None:
            with contextlib.suppress(ValueError):
                signal.signal(signal.SIGTERM, self._prev_term)

    # -- hosts ---------------------------------------------------------------------
    def add_host(self, name: str) -> Host:
        """A new host ``name`` with address ``10.<net>.0.<n>`` on the bridge."""
        self.left()
        n = len(self.hosts) + 1
        ns = f"{self.prefix}-{name}"
        veth, peer = f"{self.prefix}v{n}", f"{self.prefix}p{n}"
        ip = f"10.{self.net}.0.{n}"
        _run("ip", "netns", "add", ns)
        _run("ip", "link", "add", veth, "type", "veth", "peer", "name", peer)
        _run("ip", "link", "set", peer, "netns", ns)
        _run("ip", "link", "set", veth, "master", self.bridge)
        _run("ip", "link", "set", veth, "up")
        for argv in (("ip", "link", "set", "lo", "up"), ("ip", "addr", "add", f"{ip}/24", "dev", peer),
                     ("ip", "link", "set", peer, "up")):
            _run("ip", "netns", "exec", ns, *argv)
        anchor = subprocess.Popen(
            ["ip", "netns", "exec", ns, "unshare", "-m", "--propagation", "private", "sleep", "infinity"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        host = Host(self, name, ns, ip, veth, anchor)
        self.hosts[name] = host
        # ip netns exec and unshare both exec: the anchor's pid ends up as `sleep` in the new namespaces.
        # Until then, nsenter -t would join the wrong (our own) namespaces: wait, however loaded the machine.
        end = time.monotonic() + 60
        while True:
            with contextlib.suppress(OSError):
                with open(f"/proc/{anchor.pid}/comm") as f:
                    comm = f.read().strip()
                if (comm == "sleep" and os.readlink(f"/proc/{anchor.pid}/ns/net") != os.readlink("/proc/self/ns/net")
                        and os.readlink(f"/proc/{anchor.pid}/ns/mnt") != os.readlink("/proc/self/ns/mnt")):
                    break
            if anchor.poll() is not None:
                raise RuntimeError(f"host {name}: the namespace anchor exited ({anchor.returncode})")
            if time.monotonic() > end:
                anchor.kill()
                raise TimeoutError(f"host {name}: the namespace anchor did not start")
            time.sleep(0.02)
        host.procs.append(anchor)
        drop_copied_fuse_mounts(anchor.pid)
        host.home = str(self.dir / name)
        os.makedirs(host.home, mode=0o700, exist_ok=True)  # as lakemount makes it (an open one is tightened with a warning)
        # A real node resolves its own name (Spark's daemons look it up at start-up): here the
        # machine's hostname and the host's name are its own address, whatever /etc/hosts holds.
        self.map_name(host, f"{name} {socket.gethostname()}", ip)
        return host

    def __getitem__(self, name: str) -> Host:
        return self.hosts[name]

    # -- stores ---------------------------------------------------------------------
    def start_postgres(self, host: Host) -> str:
        """PostgreSQL on ``host``'s address (trust auth inside the cluster); returns the ``postgresql://`` URL."""
        base = self.dir / "pg"
        base.mkdir()
        shutil.chown(base, user="postgres")
        data = str(base / "data")
        su = ("runuser", "-u", "postgres", "--")
        host.run(*su, str(PG_BIN / "initdb"), "-D", data, "-A", "trust", "-U", "postgres", "--no-sync", "--no-instructions", timeout=120)
        with open(os.path.join(data, "pg_hba.conf"), "a") as f:
            f.write(f"host all all 10.{self.net}.0.0/24 trust\n")
        self._pg_data = data
        self.pg_start(host)
        host.run(*su, str(PG_BIN / "psql"), "-h", host.ip, "-U", "postgres", "-c", "CREATE DATABASE lake")
        self.pg_query(host, "CREATE EXTENSION pg_stat_statements")
        self.db_url = f"postgresql://postgres@{host.ip}:5432/lake"
        return self.db_url

    def pg_start(self, host: Host) -> None:
        # Not durable, PostgreSQL is faster and a crash could lose acknowledged commits: a test that
        # crashes it builds its cluster ``durable`` (fsync, synchronous commit, full page writes: the defaults).
        sync = "on" if self.durable else "off"
        opts = (f"-c listen_addresses='{host.ip}' -k {self.dir}/pg -c fsync={sync} -c synchronous_commit={sync} "
                f"-c full_page_writes={sync} -c max_connections=300 -c shared_preload_libraries=pg_stat_statements "
                "-c pg_stat_statements.track=all")
        host.run("runuser", "-u", "postgres", "--", str(PG_BIN / "pg_ctl"), "-D", self._pg_data, "-l",
                 str(self.dir / "pg" / "log"), "-o", opts, "-w", "-t", "60", "start", timeout=90)

    def pg_stop(self, host: Host) -> None:
        """Stop PostgreSQL (``-m fast``) and wait until its postmaster has exited."""
        pid = self.pg_pid()
        host.run("runuser", "-u", "postgres", "--", str(PG_BIN / "pg_ctl"), "-D", self._pg_data, "-m", "fast", "-w", "stop", timeout=90)
        self._gone(pid, "-m fast")

    def _gone(self, pid: int, how: str) -> None:
        """Wait for postmaster ``pid`` to exit: ``pg_ctl -w stop`` returns once ``postmaster.pid`` is gone,
        which the postmaster removes just before it exits (CI once saw it still running right after)."""
        end = time.monotonic() + 10
        while running(pid):
            assert time.monotonic() < end, f"postmaster {pid} survived pg_ctl {how} stop"
            time.sleep(0.05)

    def pg_pid(self) -> int:
        """The running postmaster's pid (the first line of ``postmaster.pid``)."""
        return int(Path(self._pg_data, "postmaster.pid").read_text().splitlines()[0])

    def pg_crash(self, host: Host) -> int:
        """Kill PostgreSQL as a crash would (``-m immediate``: backends killed, no checkpoint); returns the dead postmaster's pid.

        Raises ``AssertionError`` if the postmaster is still running afterwards.
        """
        pid = self.pg_pid()
        host.run("runuser", "-u", "postgres", "--", str(PG_BIN / "pg_ctl"), "-D", self._pg_data, "-m", "immediate", "-w", "stop", timeout=90)
        self._gone(pid, "-m immediate")
        return pid

    def pg_statements(self) -> int:
        """Statements the ``lake`` database has run so far (pg_stat_statements; this count's own excluded)."""
        return int(self.pg_query(self.hosts["db"], "SELECT coalesce(sum(calls), 0) FROM pg_stat_statements s JOIN pg_database d "
                                 "ON d.oid = s.dbid WHERE d.datname = 'lake' AND s.query NOT LIKE '%pg_stat_statements%'"))

    def pg_query(self, host: Host, sql: str) -> str:
        return host.run("runuser", "-u", "postgres", "--", str(PG_BIN / "psql"), "-h", host.ip, "-U", "postgres",
                        "-d", "lake", "-Atc", sql).stdout.strip()

    def start_s3(self, host: Host) -> str:
        """A moto S3 server on ``host`` with the bucket ``lake``; returns its endpoint URL."""
        host.spawn(PYTHON, "-m", "moto.server", "-H", host.ip, "-p", "5000", log=str(self.dir / "s3.log"))
        self.s3_endpoint = f"http://{host.ip}:5000"
        code = (
            "import boto3,sys,time\n"
            "c=boto3.client('s3',endpoint_url=sys.argv[1],aws_access_key_id='testing',aws_secret_access_key='testing',region_name='us-east-1')\n"
            "for i in range(200):\n"
            "    try:\n"
            "        c.create_bucket(Bucket='lake'); break\n"
            "    except Exception:\n"
            "        time.sleep(0.1)\n"
            "else:\n"
            "    raise SystemExit('moto did not start')\n"
        )
        host.run(PYTHON, "-c", code, self.s3_endpoint, timeout=60, env=self.env(host))
        return self.s3_endpoint

    def env(self, host: Host, **extra: str) -> dict[str, str]:
        """The environment of lakemount processes on ``host``: its own home, the shared stores."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("LAKEMOUNT_")}
        env.update(
            PYTHONPATH=str(REPO_ROOT) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else ""),
            LAKEMOUNT_HOME=host.home,
            AWS_ACCESS_KEY_ID=S3_KEY,
            AWS_SECRET_ACCESS_KEY=S3_SECRET,
            AWS_DEFAULT_REGION="us-east-1",
            LAKEMOUNT_AUTH_ENCRYPT_SECRET_KEY=self.secret_key,
        )
        if self.db_url:
            env["LAKEMOUNT_METADATA_DB_URL"] = self.db_url
        if self.s3_endpoint:
            env.update(
                LAKEMOUNT_BLOCKSTORE_TYPE="s3",
                LAKEMOUNT_BLOCKSTORE_DEFAULT_NAMESPACE_PREFIX=f"s3://{S3_BUCKET}/ns",
                LAKEMOUNT_BLOCKSTORE_S3_ENDPOINT=self.s3_endpoint,
                LAKEMOUNT_BLOCKSTORE_S3_REGION="us-east-1",
                LAKEMOUNT_BLOCKSTORE_S3_ACCESS_KEY_ID=S3_KEY,
                LAKEMOUNT_BLOCKSTORE_S3_SECRET_ACCESS_KEY=S3_SECRET,
            )
        env.update(extra)
        return env

    def add_mount(self, host: Host, args: Sequence[str] = (), mountpoint: str = "/lake", timeout: float = 60) -> None:
        """``lakemount mount MOUNTPOINT`` on ``host`` (own home and cache); returns once it serves."""
        os.makedirs(mountpoint, exist_ok=True)  # an empty directory; the mount itself stays in the host
        log = str(Path(host.home) / "mount.log")
        argv = [PYTHON, "-m", "lakemount.cli.main", "mount", mountpoint, "--foreground", *args]
        p = host.spawn(*argv, env=self.env(host), log=log)
        end = time.monotonic() + min(timeout, self.left())
        while time.monotonic() < end:
            if p.poll() is not None:
                raise RuntimeError(f"mount on {host.name} exited: {Path(log).read_text()[-2000:]}")
            probe = host.run("sh", "-c", f"grep -q ' {mountpoint} ' /proc/self/mountinfo && ls {mountpoint} >/dev/null", check=False)
            if probe.returncode == 0:
                return
            time.sleep(0.2)
        raise TimeoutError(f"mount on {host.name} did not serve within {timeout}s: {Path(log).read_text()[-2000:]}")

    def start_gateway(self, host: Host, *, workers: int = 1, port: int = 8000) -> subprocess.Popen[bytes]:
        """``lakemount serve`` on ``host``'s address; returns once it answers HTTP."""
        p = host.spawn(PYTHON, "-m", "lakemount.cli.main", "serve", "--listen", f"{host.ip}:{port}", "--workers", str(workers),
                       env=self.env(host), log=f"{host.home}/gateway.log")
        code = ("import sys,time,urllib.request,urllib.error\n"
                "end=time.time()+180\n"
                "while time.time()<end:\n"
                "    try:\n"
                "        urllib.request.urlopen(sys.argv[1],timeout=2); break\n"
                "    except urllib.error.HTTPError: break\n"
                "    except OSError: time.sleep(0.2)\n"
                "else: raise SystemExit('gateway did not answer')\n")
        try:
            host.run(PYTHON, "-c", code, f"http://{host.ip}:{port}/", timeout=200)
        except RuntimeError as exc:
            log = Path(f"{host.home}/gateway.log").read_text(errors="replace")[-3000:]
            raise RuntimeError(f"{exc}; gateway exit status {p.poll()}; its log: {log}") from None
        return p

    def kill_host_processes(self, host: Host) -> None:
        """``kill -9`` every process on ``host`` but its namespace anchor (a crash of what runs there).

        A crash takes everything at once; a listing and a kill do not, so a child forked between them
        (a gateway starting a worker) would outlive its parent.  Kill until none but the anchor is left.
        """
        end = time.monotonic() + 30
        while True:
            left = [int(p) for p in _run("ip", "netns", "pids", host.ns, check=False).stdout.split() if int(p) != host.anchor.pid]
            if not left:
                return
            assert time.monotonic() < end, f"processes on {host.name} outlived 30 s of kill -9: {left}"
            for pid in left:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.02)

    # -- Spark standalone, from PySpark's own jars ----------------------------------------
    def spark_env(self, host: Host, spark_python: str = PYTHON) -> dict[str, str]:
        """The environment of Spark daemons and drivers on ``host`` (Spark from ``spark_python``'s PySpark)."""
        home = subprocess.run([spark_python, "-c", "import os, pyspark; print(os.path.dirname(pyspark.__file__))"],
                              capture_output=True, text=True, check=True).stdout.strip()
        from tests.spark_s3a.s3a_job import JAVA_OPTS

        return self.env(host, SPARK_HOME=home, SPARK_LOCAL_IP=host.ip, SPARK_LOG_DIR=f"{host.home}/spark-logs",
                        SPARK_WORKER_DIR=f"{host.home}/spark-work", PYSPARK_PYTHON=spark_python,
                        SPARK_DAEMON_MEMORY="256m", SPARK_DAEMON_JAVA_OPTS=JAVA_OPTS)

    def start_spark(self, master: Host, workers: Sequence[Host], *, cores: int = 1, memory: str = "768m",
                    spark_python: str = PYTHON) -> str:
        """A standalone master on ``master`` and a worker on each of ``workers``; returns the master URL."""
        spark_class = os.path.join(self.spark_env(master, spark_python)["SPARK_HOME"], "bin", "spark-class")
        url = f"spark://{master.ip}:7077"
        tag = str(self._spark_runs)  # a log of its own per start: a master log read again would list the workers of a run before
        self._spark_runs += 1
        self._spark_hosts += [master, *workers]
        mlog = f"{master.home}/master{tag}.log"
        self._spark.append(master.spawn(spark_class, "org.apache.spark.deploy.master.Master", "--host", master.ip, "--port", "7077",
                                        "--webui-port", "8080", env=self.spark_env(master, spark_python), log=mlog))
        self._wait_port(master, master.ip, 7077, timeout=min(300, self.left()))
        for w in workers:
            self._spark.append(w.spawn(spark_class, "org.apache.spark.deploy.worker.Worker", url, "--host", w.ip, "--cores",
                                       str(cores), "--memory", memory, "--webui-port", "8081",
                                       env=self.spark_env(w, spark_python), log=f"{w.home}/worker{tag}.log"))
        end = time.monotonic() + min(180, self.left())
        log = ""
        while time.monotonic() < end:  # the master's log names every worker that registered
            log = Path(mlog).read_text(errors="replace")
            if all(f"Registering worker {w.ip}:" in log for w in workers):
                return url
            time.sleep(0.5)
        raise TimeoutError(f"Spark workers did not register: {log[-2000:]}")

    def stop_spark(self) -> None:
        """Stop the Spark master and workers, and wait until their executors (and the executors' Python workers)
        are gone too: a worker kills its executors as it stops, but leaves one behind when it is killed itself or
        the executor outlives its 10 s to die; PySpark's workers end once their executor has."""
        hosts, self._spark_hosts = self._spark_hosts, []
        for p in self._spark:
            p.terminate()
        for p in self._spark:
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(30)
        self._spark.clear()
        end = time.monotonic() + 60
        while left := spark_processes(hosts):
            assert time.monotonic() < end, f"Spark processes outlived their master and workers by 60 s: {left}"
            time.sleep(0.1)

    def map_name(self, host: Host, name: str, ip: str) -> None:
        """Make ``name`` (one or more, space-separated) resolve to ``ip`` on ``host`` only (a bind mount over /etc/hosts in its mount namespace)."""
        path = Path(host.home) / "hosts"
        base = Path("/etc/hosts").read_text() if not path.exists() else path.read_text()
        path.write_text(base + f"{ip} {name}\n")
        host.run("mount", "--bind", str(path), "/etc/hosts")

    def _wait_port(self, host: Host, ip: str, port: int, timeout: float = 120) -> None:
        code = ("import socket,sys,time\n"
                "end=time.time()+float(sys.argv[3])\n"
                "while time.time()<end:\n"
                "    try:\n"
                "        socket.create_connection((sys.argv[1],int(sys.argv[2])),1).close(); break\n"
                "    except OSError: time.sleep(0.2)\n"
                "else: raise SystemExit('port closed')\n")
        host.run(PYTHON, "-c", code, ip, str(port), str(timeout), timeout=timeout + 10)

    def shell(self, host: Host, script: str, timeout: float = 60, check: bool = True) -> subprocess.CompletedProcess[str]:
        return host.run("sh", "-c", script, timeout=timeout, check=check)


@contextlib.contextmanager
def cluster(names: Sequence[str], *, deadline: float = 600, mounts: Sequence[str] = (), mount_args: Sequence[str] = (),
            durable: bool = False) -> Iterator[Cluster]:
    """A cluster with hosts ``names`` (``db`` and ``s3`` get their stores) and a mount on each of ``mounts``."""
    with Cluster(deadline=deadline, durable=durable) as c:
        for name in names:
            c.add_host(name)
        if "db" in c.hosts:
            c.start_postgres(c["db"])
        if "s3" in c.hosts:
            c.start_s3(c["s3"])
        for name in mounts:
            c.add_mount(c[name], mount_args)
        yield c


def spark_processes(hosts: Sequence[Host]) -> list[str]:
    """The processes of Spark on ``hosts`` (its JVMs run ``org.apache.spark`` classes; PySpark's workers, module
    ``pyspark.daemon``), as ``host:pid command``."""
    found = []
    for h in {h.name: h for h in hosts}.values():
        for pid in _run("ip", "netns", "pids", h.ns, check=False).stdout.split():
            try:
                argv = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
            except (FileNotFoundError, ProcessLookupError):
                continue  # ended meanwhile
            if running(int(pid)) and any("org.apache.spark" in a or "pyspark" in a for a in argv):
                found.append(f"{h.name}:{pid} {' '.join(argv)[:300]}")
    return found


def running(pid: int) -> bool:
    """Whether process ``pid`` exists and is not a zombie (a dead daemon waits for the reaper it was reparented to)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


def stat_total(stats: str, metric: str, **labels: str) -> int:
    """The sum of ``metric``'s samples in Prometheus text ``stats`` whose labels include ``labels``."""
    total = 0
    want = [f'{k}="{v}"' for k, v in labels.items()]
    for line in stats.splitlines():
        if line.startswith(metric + "{") and all(w in line.split("}")[0] for w in want):
            total += int(float(line.rsplit(" ", 1)[1]))
    return total


def quote(argv: Sequence[str]) -> str:
    return " ".join(shlex.quote(a) for a in argv)
