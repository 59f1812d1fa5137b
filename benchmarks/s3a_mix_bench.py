"""S3A's request mix replayed against the gateway, without Spark: requests/s, ms per request and the gateway's CPU.

    PYTHONPATH=. .venv/bin/python benchmarks/s3a_mix_bench.py [--files 400] [--threads 4] [--rounds 3]
        [--trees base=/tmp/s3a57/base,new=.] [--put-payload streaming|unsigned|signed]

What Spark's S3A (hadoop-aws 3.3.1, AWS SDK 1.11) sends per Parquet file with the v1 committer, as the gateway
counted it (docs/SCALE.md, stops 54 and 55: 42.9 requests a file): 17 HeadObject (12 of them 404), 15
ListObjectsV2 (``max-keys`` 1-2, delimiter ``/``), 6.5 DeleteObjects (the fake directory markers of every parent,
and each rename's source), 2.5 PutObject (the file, directory markers) and 2 CopyObject (v1 renames each file twice).
Here each simulated file is one such sequence (``file_requests``: the attempt directory made, the file written into
it, the task commit's rename to the task directory, the job commit's to the dataset), sent by several client
threads over keep-alive connections to a ``lakemount serve`` (embedded store, two workers, as the Spark benchmark
runs it) on a fresh home.  Every request is signed as the SDK signs it over plain HTTP: SigV4 with the payload's
SHA-256 (the empty one for a body-less request, the XML's for DeleteObjects, with its Content-MD5), and a PutObject
as ``STREAMING-AWS4-HMAC-SHA256-PAYLOAD`` (aws-chunked, each chunk signed; ``--put-payload`` picks another mode).

Printed per round: requests/s, the client's ms per request by operation, and the gateway's CPU per request (its
supervisor's and workers' ``utime + stime`` from ``/proc``, before and after the timed part).  With ``--trees``
the gateway runs from each tree in turn (``name=path``; a tree is a checkout with its ``.venv`` and built
extensions), alternating, ``--rounds`` times each, and the ratios are the medians' of each pair.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import hmac
import http.client
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import defaultdict
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import quote

KEY = "AKIAS3AMIXBENCH00000"
SECRET = "s3amixbenchsecret000000000000000000000000"
REGION = "us-east-1"
BUCKET = "bench"
EMPTY_SHA = hashlib.sha256(b"").hexdigest()
STREAMING = "STREAMING-AWS4-HMAC-SHA256-PAYLOAD"
BODY = 8 * 1024
HZ = os.sysconf("SC_CLK_TCK")


# --- a SigV4 client signing as AWS SDK 1.11 does over HTTP --------------------------------------


def _key(date: str) -> bytes:
    k = hmac.new(f"AWS4{SECRET}".encode(), date.encode(), hashlib.sha256).digest()
    for part in (REGION, "s3", "aws4_request"):
        k = hmac.new(k, part.encode(), hashlib.sha256).digest()
    return k


def _canonical_query(query: dict[str, str]) -> str:
    return "&".join(f"{quote(k, safe='-_.~')}={quote(v, safe='-_.~')}" for k, v in sorted(query.items()))


class Client:
    """One keep-alive connection; ``send`` signs, sends and reads one request, returning its status."""

    def __init__(self, port: int) -> None:
        self.host = f"127.0.0.1:{port}"
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)

    def send(self, method: str, key: str, *, query: dict[str, str] | None = None, body: bytes = b"",
             headers: dict[str, str] | None = None, put_payload: str = "sha") -> int:
        target, h, wire = signed_request(self.host, method, key, query=query, body=body, headers=headers,
                                         put_payload=put_payload)
        self.conn.request(method, target, body=wire if method in ("PUT", "POST") else None, headers=h)
        r = self.conn.getresponse()
        r.read()
        return r.status


def signed_request(host: str, method: str, key: str, *, query: dict[str, str] | None = None, body: bytes = b"",
                   headers: dict[str, str] | None = None, put_payload: str = "sha") -> tuple[str, dict[str, str], bytes]:
    """(request target, headers, body on the wire) of one request signed as the SDK signs it."""
    query = query or {}
    amz = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    scope = f"{amz[:8]}/{REGION}/s3/aws4_request"
    skey = _key(amz[:8])
    wire = body
    h = {"host": host, "x-amz-date": amz, "user-agent": "Hadoop 3.3.1, aws-sdk-java/1.11.901",
         "amz-sdk-invocation-id": os.urandom(8).hex(), "amz-sdk-retry": "0/0/500", **(headers or {})}
    if put_payload == "streaming":
        h["x-amz-content-sha256"] = STREAMING
        h["content-encoding"] = "aws-chunked"
        h["x-amz-decoded-content-length"] = str(len(body))
    elif put_payload == "unsigned":
        h["x-amz-content-sha256"] = "UNSIGNED-PAYLOAD"
    else:
        h["x-amz-content-sha256"] = hashlib.sha256(body).hexdigest() if body else EMPTY_SHA
    if put_payload == "streaming":
        # The encoded length is signed, so the chunks' lengths are known first (signatures are 64 hex digits).
        chunks = [body[:65536]] if body else []
        encoded = sum(len(f"{len(c):x};chunk-signature=") + 64 + 2 + len(c) + 2 for c in [*chunks, b""])
        h["content-length"] = str(encoded)
    elif method in ("PUT", "POST"):
        h["content-length"] = str(len(body))
    path = f"/{BUCKET}/{quote(key, safe='/~')}" if key else f"/{BUCKET}"
    signed = sorted(n for n in h if n != "user-agent")
    creq = "\n".join([method, path, _canonical_query(query), "".join(f"{n}:{h[n]}\n" for n in signed),
                      ";".join(signed), h["x-amz-content-sha256"]])
    sts = "\n".join(["AWS4-HMAC-SHA256", amz, scope, hashlib.sha256(creq.encode()).hexdigest()])
    sig = hmac.new(skey, sts.encode(), hashlib.sha256).hexdigest()
    h["authorization"] = f"AWS4-HMAC-SHA256 Credential={KEY}/{scope}, SignedHeaders={';'.join(signed)}, Signature={sig}"
    if put_payload == "streaming":
        out, prev = bytearray(), sig
        for c in [*([body] if body else []), b""]:
            csts = "\n".join(["AWS4-HMAC-SHA256-PAYLOAD", amz, scope, prev, EMPTY_SHA, hashlib.sha256(c).hexdigest()])
            prev = hmac.new(skey, csts.encode(), hashlib.sha256).hexdigest()
            out += f"{len(c):x};chunk-signature={prev}\r\n".encode() + c + b"\r\n"
        wire = bytes(out)
        assert len(wire) == int(h["content-length"])
    target = path + (f"?{_canonical_query(query)}" if query else "")
    return target, h, wire


# --- S3A's sequence per file ------------------------------------------------------------------


def _parents(key: str) -> list[str]:
    """The directory markers S3A deletes after writing ``key``: every parent's ``dir/``, deepest first."""
    parts = key.rstrip("/").split("/")
    return ["/".join(parts[:n]) + "/" for n in range(len(parts) - 1, 1, -1)]


def _delete_xml(keys: list[str]) -> bytes:
    inner = "".join(f"<Object><Key>{k}</Key></Object>" for k in keys)
    return f'<?xml version="1.0" encoding="UTF-8"?><Delete><Quiet>true</Quiet>{inner}</Delete>'.encode()


def file_requests(i: int, body: bytes, put_payload: str) -> list[tuple[str, tuple, dict, tuple[int, ...]]]:
    """S3A's requests for file ``i``: (operation, send's positional args, its keyword args, the statuses expected).

    17 HEAD (12 of them 404), 15 LIST (max-keys 1-2, delimiter ``/``), 6 or 7 DeleteObjects, 2 or 3 PUT, 2 COPY.
    """
    ds = "main/ds/mix/"
    attempts = ds + "_temporary/0/_temporary/"
    a = f"{attempts}attempt_{i:06d}/"
    t = f"{ds}_temporary/0/task_{i:06d}/"
    f = f"part-{i:06d}.parquet"
    seq: list[tuple[str, tuple, dict, tuple[int, ...]]] = []

    def head(key: str, found: bool) -> None:
        seq.append(("HeadObject", ("HEAD", key), {}, (200,) if found else (404,)))

    def ls(prefix: str, max_keys: int = 2) -> None:
        q = {"list-type": "2", "prefix": prefix, "delimiter": "/", "max-keys": str(max_keys), "fetch-owner": "false"}
        seq.append(("ListObjectsV2", ("GET", ""), {"query": q}, (200,)))

    def missing(key: str) -> None:  # getFileStatus of a path that is not there: the file, the marker, the listing
        head(key.rstrip("/"), False)
        head(key.rstrip("/") + "/", False)
        ls(key.rstrip("/") + "/")

    def put(key: str, data: bytes) -> None:
        # The SDK asks for a 100 Continue before a PutObject's body (the gateway answers once it reads the body).
        headers = {"content-type": "application/octet-stream", "expect": "100-continue"}
        seq.append(("PutObject", ("PUT", key), {"body": data, "headers": headers,
                                                  "put_payload": put_payload if data else "sha"}, (200,)))

    def delete(keys: list[str]) -> None:
        xml = _delete_xml(keys)
        md5 = base64.b64encode(hashlib.md5(xml).digest()).decode()
        seq.append(("DeleteObjects", ("POST", ""), {"query": {"delete": ""}, "body": xml,
                                                     "headers": {"content-md5": md5, "content-type": "application/xml"}},
                    (200,)))

    def copy(src: str, dst: str) -> None:
        seq.append(("CopyObject", ("PUT", dst), {"headers": {"x-amz-copy-source": quote(f"/{BUCKET}/{src}", safe="/~"),
                                                             "x-amz-metadata-directive": "REPLACE",
                                                             "content-type": "application/octet-stream"}}, (200,)))

    # The task makes its attempt directory and writes the file into it.
    missing(a)
    ls(attempts, 1)
    put(a, b"")
    delete(_parents(a))
    missing(a + f)
    ls(a)
    put(a + f, body)
    delete(_parents(a + f))
    head(a + f, True)
    head(a + f, True)
    # The task commit renames the attempt directory into the task directory.
    head(a.rstrip("/"), False)
    head(a, False)
    ls(a)
    missing(t)
    ls(f"{ds}_temporary/0/")
    ls(a)
    missing(t + f)
    copy(a + f, t + f)
    delete([a + f])
    delete(_parents(t + f))
    head(t + f, True)
    ls(attempts)
    if i % 2:
        put(t, b"")  # the task directory's marker, as S3A puts one for about every other file
        delete([t])
    # The job commit renames the task's file into the dataset.
    missing(ds + f)
    head(t + f, True)
    ls(t)
    copy(t + f, ds + f)
    delete([t + f])
    delete(_parents(ds + f))
    head(ds + f, True)
    ls(ds)
    ls(ds, 1)
    ls(attempts)
    return seq


# --- the gateway from a tree ------------------------------------------------------------------


def _python(tree: Path) -> str:
    venv = tree / ".venv" / "bin" / "python"
    return str(venv) if venv.exists() else sys.executable


def _env(tree: Path, home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LAKEMOUNT_")}
    env.update(LAKEMOUNT_HOME=str(home), PYTHONPATH=str(tree))
    return env


def start_gateway(tree: Path, home: Path, workers: int) -> tuple[subprocess.Popen[str], int]:
    """``lakemount serve`` of ``tree`` on a fresh ``home`` with this benchmark's admin key; (process, port)."""
    home.mkdir(parents=True)
    env = _env(tree, home)
    make_admin = ("from lakemount.app import App; from lakemount.config import load; import os; "
                  "a = App(load(None, env=dict(os.environ))); a.auth.create_user('admin'); "
                  "a.auth.attach_policy('admin', 'Admin'); "
                  f"a.auth.create_credentials('admin', {KEY!r}, {SECRET!r}); a.release_connections()")
    subprocess.run([_python(tree), "-c", make_admin], env=env, cwd=tree, check=True)
    proc = subprocess.Popen([_python(tree), "-m", "lakemount.cli.main", "serve", "--listen", "127.0.0.1:0",
                             "--workers", str(workers), "--no-api"], env=env, cwd=tree, stdout=subprocess.PIPE,
                            stderr=open(home / "gateway.log", "w"), text=True)  # noqa: SIM115 - the process's
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if "listening on" not in line:
        proc.kill()
        raise SystemExit(f"the gateway of {tree} did not start: {line!r}; see {home / 'gateway.log'}")
    port = int(line.split("listening on ", 1)[1].split()[0].rsplit(":", 1)[1])
    deadline = time.monotonic() + 60
    while True:
        try:
            if Client(port).send("PUT", "") in (200, 409):  # CreateBucket: the repository, branch main
                break
        except OSError:
            pass
        if time.monotonic() > deadline:
            raise SystemExit(f"the gateway of {tree} never answered")
        time.sleep(0.2)
    return proc, port


def stop(proc: subprocess.Popen[str]) -> None:
    proc.terminate()
    try:
        proc.wait(30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def _tree_pids(pid: int) -> list[int]:
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        try:
            for task in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{task}/children") as fh:
                    todo += [int(c) for c in fh.read().split()]
        except OSError:
            pass
    return out


def cpu_seconds(pid: int) -> tuple[float, float]:
    """(utime, stime) of ``pid`` and its descendants (the supervisor and its workers), in seconds."""
    user = system = 0
    for p in _tree_pids(pid):
        try:
            with open(f"/proc/{p}/stat") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        user += int(fields[11])  # utime, stime: fields 14 and 15
        system += int(fields[12])
    return user / HZ, system / HZ


# --- one round ----------------------------------------------------------------------------------


def run_round(tree: Path, root: Path, label: str, files: int, threads: int, workers: int, put_payload: str,
              warm: int) -> dict[str, object]:
    home = root / f"{label}-{time.monotonic_ns()}"
    proc, port = start_gateway(tree, home, workers)
    try:
        body = os.urandom(BODY)
        plans = {i: file_requests(i, body, put_payload) for i in range(files + warm)}
        times: dict[str, list[float]] = defaultdict(list)
        errors: list[str] = []
        lock = threading.Lock()

        def work(ids: list[int], record: bool) -> None:
            c = Client(port)
            mine: dict[str, list[float]] = defaultdict(list)
            try:
                for i in ids:
                    for op, args, kw, expected in plans[i]:
                        t0 = time.perf_counter()
                        status = c.send(*args, **kw)
                        mine[op].append(time.perf_counter() - t0)
                        if status not in expected:
                            raise RuntimeError(f"{op} {args} {kw.get('query', '')}: HTTP {status}, expected {expected}")
            except Exception as err:  # noqa: BLE001 - reported after the round
                errors.append(repr(err))
            if record:
                with lock:
                    for op, ts in mine.items():
                        times[op] += ts

        def phase(ids: range, record: bool) -> float:
            ts = [threading.Thread(target=work, args=(list(ids[n::threads]), record)) for n in range(threads)]
            t0 = time.perf_counter()
            for t in ts:
                t.start()
            for t in ts:
                t.join()
            return time.perf_counter() - t0

        phase(range(files, files + warm), False)  # the workers' first requests (imports, caches) outside the figures
        user0, sys0 = cpu_seconds(proc.pid)
        wall = phase(range(files), True)
        user1, sys1 = cpu_seconds(proc.pid)
        cpu = user1 + sys1 - user0 - sys0
        if errors:
            raise SystemExit(f"{label}: {len(errors)} client threads failed, first: {errors[0]}")
        n = sum(len(v) for v in times.values())
        return {"label": label, "wall": wall, "requests": n, "rps": n / wall, "cpu_ms": 1000 * cpu / n,
                "sys_ms": 1000 * (sys1 - sys0) / n,
                "files_s": files / wall, "ms": {op: 1000 * statistics.fmean(v) for op, v in times.items()},
                "per_file": {op: len(v) / files for op, v in times.items()}}
    finally:
        stop(proc)
        shutil.rmtree(home, ignore_errors=True)


def in_process(files: int, warm: int, put_payload: str) -> None:
    """The same requests handed to ``S3Gateway.handle`` in this process, signed beforehand: the handler's own CPU
    a request, without the server (uvicorn, the ASGI adapter, the hand-off to a thread, the sockets)."""
    from lakemount.app import App
    from lakemount.config import load
    from lakemount.gateway.handler import S3Gateway
    from lakemount.gateway.settings import from_config
    from lakemount.serving.http import BytesBody, Request

    home = tempfile.mkdtemp(prefix="s3a-mix-inproc-")
    try:
        app = App(load(None, env={"LAKEMOUNT_HOME": home}))
        app.auth.create_user("admin")
        app.auth.attach_policy("admin", "Admin")
        app.auth.create_credentials("admin", KEY, SECRET)
        gateway = S3Gateway(app, from_config(app.config))
        app.start()  # the audit trail's flusher, as a worker runs it
        body = os.urandom(BODY)

        def prepared(ids: range) -> list[tuple[str, Request, tuple[int, ...]]]:
            out = []
            for i in ids:
                for op, (method, key), kw, expected in file_requests(i, body, put_payload):
                    target, h, wire = signed_request("gw", method, key, **kw)
                    path, _, query = target.partition("?")
                    out.append((op, Request(method, path, query, tuple((k.lower(), v) for k, v in h.items()), BytesBody(wire)),
                                expected))
            return out

        made = signed_request("gw", "PUT", "")
        assert gateway.handle(Request("PUT", made[0], "", tuple(made[1].items()), BytesBody(b""))).status == 200
        times: dict[str, list[float]] = defaultdict(list)
        for record, ids in ((False, range(files, files + warm)), (True, range(files))):
            requests = prepared(ids)
            cpu0 = time.process_time()
            for op, request, expected in requests:
                t0 = time.perf_counter()
                response = gateway.handle(request)
                if response.close is not None:
                    response.close()
                times[op].append(time.perf_counter() - t0)
                if response.status not in expected:
                    raise SystemExit(f"{op} {request.raw_path}?{request.raw_query}: {response.status}, expected {expected}")
            if not record:
                times.clear()
        cpu = time.process_time() - cpu0
        n = sum(len(v) for v in times.values())
        ms = "  ".join(f"{op} {1000 * statistics.fmean(v):.3f}" for op, v in sorted(times.items()))
        print(f"in process: {1000 * cpu / n:.3f} ms of CPU a request over {n} requests (ms a request: {ms}); "
              f"load {os.getloadavg()[0]:.2f}")
        app.close()
    finally:
        shutil.rmtree(home, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--files", type=int, default=400, help="simulated files per round (timed)")
    ap.add_argument("--warm", type=int, default=20, help="files sent before the timed part of each round")
    ap.add_argument("--threads", type=int, default=4, help="client threads (S3A's task threads and its pool)")
    ap.add_argument("--workers", type=int, default=2, help="gateway workers (the Spark benchmark's two)")
    ap.add_argument("--rounds", type=int, default=1, help="rounds per tree, alternating")
    ap.add_argument("--trees", default="this=.", help="name=path,... (default: this checkout)")
    ap.add_argument("--put-payload", choices=("streaming", "unsigned", "signed"), default="streaming",
                    help="how PutObject's body is signed (AWS SDK 1.11 over HTTP: streaming)")
    ap.add_argument("--dir", default=None, help="where the homes go (default: a temporary directory)")
    ap.add_argument("--in-process", action="store_true",
                    help="hand the requests to S3Gateway.handle in this process (the lakemount on PYTHONPATH): the "
                    "handler's own CPU a request, without the server")
    args = ap.parse_args()
    if args.in_process:
        in_process(args.files, args.warm, {"signed": "sha"}.get(args.put_payload, args.put_payload))
        return
    trees = [(name, Path(path).resolve()) for name, path in (t.split("=", 1) for t in args.trees.split(","))]
    put_payload = {"signed": "sha"}.get(args.put_payload, args.put_payload)
    root = Path(tempfile.mkdtemp(prefix="s3a-mix-", dir=args.dir))
    print(f"{args.files} files a round ({args.warm} warm-up), {args.threads} client threads, {args.workers} gateway "
          f"workers, PutObject {args.put_payload}; load {os.getloadavg()[0]:.2f} at start", flush=True)
    results: dict[str, list[dict[str, object]]] = defaultdict(list)
    try:
        for r in range(args.rounds):
            for name, tree in trees:
                res = run_round(tree, root, name, args.files, args.threads, args.workers, put_payload, args.warm)
                results[name].append(res)
                ms = "  ".join(f"{op} {v:.2f}" for op, v in sorted(res["ms"].items()))  # type: ignore[attr-defined]
                print(f"round {r + 1} {name:>6}: {res['rps']:7.0f} requests/s  {res['files_s']:6.1f} files/s  "
                      f"gateway CPU {res['cpu_ms']:.3f} ms/request ({res['sys_ms']:.3f} of it system)  (ms a request: {ms})  "
                      f"load {os.getloadavg()[0]:.2f}", flush=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    first = next(iter(results.values()))[0]
    print("requests per file: " + ", ".join(f"{op} {n:.2f}" for op, n in sorted(first["per_file"].items())))  # type: ignore[attr-defined]
    med = {name: {k: statistics.median(float(r[k]) for r in rs) for k in ("rps", "cpu_ms")} for name, rs in results.items()}
    for name, m in med.items():
        print(f"median {name:>6}: {m['rps']:.0f} requests/s, gateway CPU {m['cpu_ms']:.3f} ms/request")
    if len(trees) == 2:
        (a, _), (b, _) = trees
        print(f"{b}/{a}: requests/s x{med[b]['rps'] / med[a]['rps']:.2f}, "
              f"gateway CPU per request x{med[b]['cpu_ms'] / med[a]['cpu_ms']:.2f}")
    print(f"load {os.getloadavg()[0]:.2f} at end")


if __name__ == "__main__":
    socket.setdefaulttimeout(120)
    main()
