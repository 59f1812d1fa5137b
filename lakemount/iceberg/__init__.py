"""An Iceberg REST catalog over the branches of the lake (``/iceberg/api/v1/...``).

Namespaces are ``<repo>.<ref>.<namespace...>``; a table lives in its branch
(``names.py`` decides where), so tables branch, merge and travel in time with
everything else.  A table commit is a compare-and-set of the table's pointer
object (``tables.py`` over ``Catalog.apply_if``) after its requirements held
(``requirements.py``) and its updates applied (``updates.py``);
``transactions/commit`` swaps several pointers in one staging change.  The
HTTP side (``service.py``) is mounted by the API server and answers the
protocol's error shape (``errors.py``); bearer tokens come from
``oauth/tokens`` (``tokens.py``).
"""
