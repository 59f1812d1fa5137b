"""The REST API: lakeFS's ``/api/v1`` for what lakeFS's Python clients call, over the catalog.

``handler.py`` routes a request (``routing.py``), authenticates it
(``auth.py``: basic auth with access keys, or a signed token from
``/auth/login``), checks the caller's policies, and runs one operation from a
resource module (``repositories``, ``branches``, ``refs``, ``commits``,
``tags``, ``objects``, ``imports``, ``users``, ``setup``).  Errors become
lakeFS's ``{"message": ...}`` bodies with its status codes (``errors.py``);
listings use its pagination (``pagination.py``).  The server framework is the
gateway's raw ASGI adapter; ``server.py`` runs several worker processes.  Like
the mount and the gateway, the API is a front end of the catalog and never
touches graveler.
"""
