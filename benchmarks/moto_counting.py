"""A moto S3 server on loopback that counts the requests it serves, for the mount benchmarks.

    python benchmarks/moto_counting.py PORT [HOST]

Wraps moto's WSGI application in a middleware that counts requests by kind
(GET, ranged GET, HEAD, PUT, LIST, other), and the seconds spent serving them
(``seconds``: moto's service time, the response built); ``GET /__counts`` returns
them as JSON without reaching moto.  Prints ``ready`` on stdout once it serves.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable
from typing import Any

from moto.moto_server.werkzeug_app import DomainDispatcherApplication, MotoRequestHandler, create_backend_app
from werkzeug.serving import make_server

COUNTS_PATH = "/__counts"


class Counting:
    """WSGI middleware: one count per request, by kind."""

    def __init__(self, app: Callable[..., Iterable[bytes]]) -> None:
        self.app = app
        self.counts: Counter[str] = Counter()
        self.seconds = 0.0
        self.lock = threading.Lock()

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        path = environ.get("PATH_INFO", "")
        if path == COUNTS_PATH:
            with self.lock:
                body = json.dumps({**self.counts, "seconds": round(self.seconds, 6)}).encode()
            start_response("200 OK", [("Content-Type", "application/json"), ("Content-Length", str(len(body)))])
            return [body]
        method = environ.get("REQUEST_METHOD", "")
        query = environ.get("QUERY_STRING", "")
        if method == "GET" and (path.count("/") <= 1 or path.endswith("/")) and ("list-type" in query or "prefix" in query or "delimiter" in query or not query):
            kind = "LIST"
        elif method == "GET" and environ.get("HTTP_RANGE"):
            kind = "GET_RANGE"
        elif method == "PUT" and environ.get("HTTP_X_AMZ_COPY_SOURCE"):
            kind = "COPY"
        else:
            kind = method
        t = time.perf_counter()
        body = list(self.app(environ, start_response))  # moto builds its whole response: time it all
        with self.lock:
            self.counts[kind] += 1
            self.counts["total"] += 1
            self.seconds += time.perf_counter() - t
        return body


def main() -> None:
    port = int(sys.argv[1])
    host = sys.argv[2] if len(sys.argv) > 2 else "127.0.0.1"
    app = Counting(DomainDispatcherApplication(create_backend_app))
    server = make_server(host, port, app, threaded=True, request_handler=MotoRequestHandler)
    print("ready", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
