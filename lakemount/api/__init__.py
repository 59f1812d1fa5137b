"""The REST API: lakeFS's ``/api/v1`` for what lakeFS's Python clients call, over the catalog.

``handler.py`` routes a request (``routing.py``), authenticates it
(``auth.py``: basic auth with access keys, or a signed token from
``/auth/login``), checks the caller's policies, and runs one operation from a
resource module (``repositories``, ``branches``, ``refs``, ``commits``,
``tags``, ``objects``, ``imports``, ``users``, ``setup``).  Errors become
lakeFS's ``{"message": ...}`` bodies with its status codes (``errors.py``);
listings use its pagination (``pagination.py``).  The API stands on the
gateway for its HTTP plumbing, one layer down (the gateway imports nothing of
the API): the framework-free ``Request``/``Response`` (``gateway/http.py``), the
raw ASGI adapter (``gateway/asgi.py``), and the object helpers (ranges,
memory-mapped local reads, entries made from uploads in ``gateway/objects.py``),
so an object reads and lands the same through both; ``server.py`` runs several
worker processes.  Like
the mount and the gateway, the API is a front end of the catalog and never
touches graveler.
"""
