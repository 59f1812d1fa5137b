"""The web UI: static pages served by the API server at ``/``, a client of ``/api/v1``.

``pages.serve`` answers every path outside ``/api/v1``: the single page
(``static/index.html``, its script and style) and the login page; a page
request without a valid session cookie is redirected to ``/login``.  All
data and every change go through the API from the browser, with the
``internal_auth_session`` cookie and the CSRF header ``csrf.HEADER``
(checked in ``csrf.check`` for cookie-authenticated state changes).
``preview`` adds the one operation the UI needs beyond lakeFS's API: a
bounded, typed preview of an object (text, CSV, JSON, Parquet, image).
"""
