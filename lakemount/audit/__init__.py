"""The audit trail (docs/DESIGN.md §9): who read and changed what, from every front end, as Parquet tables.

- :mod:`~lakemount.audit.record`: one :class:`AuditRecord` per data access or change;
- :mod:`~lakemount.audit.context`: who is acting in this request or process (set once at each edge);
- :mod:`~lakemount.audit.log`: the per-process buffer and its flusher thread, the crash markers;
- :mod:`~lakemount.audit.table`: the Parquet layout under a repository's namespace, the reader, retention.

This package imports nothing of the catalog or the front ends: the composition root (``app.py``)
hands it a block adapter and a way to find a repository's namespace.
"""
