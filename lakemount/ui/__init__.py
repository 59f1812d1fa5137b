"""The web UI: static pages served by the API server at ``/``, a client of ``/api/v1``.

``pages.serve`` answers every path outside ``/api/v1``: the single page
(``static/index.html``, its script and style) and the login page; a page
request without a valid session cookie is redirected to ``/login``.  All
data and every change go through the API from the browser, with the
``internal_auth_session`` cookie and the CSRF header of ``api/csrf.py``.
The API server (``api/handler.py``) hosts the UI: it imports this package,
which imports nothing of ``lakemount.api`` (tests/test_layering.py); the
session check and the UI's own operation (``api/preview.py``, a bounded,
typed preview of an object) are the API's.
"""
