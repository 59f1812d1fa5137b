"""The REST API: lakeFS's ``/api/v1`` for what lakeFS's Python clients call, over the catalog.

``handler.py`` routes a request (``routing.py``), authenticates it
(``auth.py``: basic auth with access keys, or a signed token from
``/auth/login``), checks the caller's policies, and runs one operation from a
resource module (``repositories``, ``branches``, ``refs``, ``commits``,
``tags``, ``objects``, ``imports``, ``users``, ``setup``).  Errors become
lakeFS's ``{"message": ...}`` bodies with its status codes (``errors.py``);
listings use its pagination (``pagination.py``).  The API shares its HTTP
plumbing with the S3 gateway through ``lakemount/serving`` (the framework-free
``Request``/``Response``, the raw ASGI adapter, memory-mapped object bodies,
byte ranges, the worker processes) and imports nothing of the gateway, so an
object reads the same through both; ``server.py`` runs several worker
processes.  Like the mount and the gateway, the API is a front end of the
catalog and never touches graveler.
"""
