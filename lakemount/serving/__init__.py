"""What the HTTP front ends (the S3 gateway and the REST API) share, below both.

- ``http.py``     the framework-free ``Request`` (body read on demand by a worker
                  thread) and ``Response`` (bytes, or chunks streamed).
- ``asgi.py``     the only module that knows the server framework: a blocking
                  ``Request -> Response`` handler served as a raw ASGI application.
- ``bodies.py``   a stored object's bytes as chunks (memory-mapped when local).
- ``ranges.py``   HTTP byte ranges and dates.
- ``metadata.py`` an object's metadata as headers (user metadata, the standard
                  headers S3 stores), one mapping for both front ends.
- ``workers.py``  one listening socket, several worker processes, a supervisor.
- ``metrics.py``  request counters per worker, summed over the workers as
                  Prometheus text (the API's ``/metrics``).

This package imports neither front end; protocol concerns (S3's XML errors and
signatures, lakeFS's JSON errors) stay with them.  Each module is imported on
its own (this one imports nothing), so a CLI verb pays only for what it uses.
"""
