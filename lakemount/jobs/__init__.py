"""Batch work on Spark: garbage collection, zero-copy import and export.

Each job is a plain function over an :class:`~lakemount.app.App` that runs on a
``SparkSession`` (``session.py``: one per process, ``local[*]`` unless told
otherwise).  The driver plans and reports; executors open their own ``App``
from the same configuration (``runtime.py``) and read ranges, list objects and
copy bytes themselves, so no job ever gathers a repository's entries in the
driver.  PySpark is imported only when a job runs.
"""
