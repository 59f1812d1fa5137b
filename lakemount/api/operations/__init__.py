"""One module per resource of the API; each declares its operations with ``routing.operation``.

``routes.py`` lists every operation (declaring one registers nothing); shared pieces live beside this package
(``context.py`` for what an operation receives, ``upload.py`` for uploads, ``pagination.py``, ``models.py``).
"""
