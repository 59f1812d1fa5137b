"""Content rendering for the web UI: what an object's bytes look like on a page, computed from the bytes alone.

``table_diff`` compares two versions of a CSV or Parquet object (schema and rows, with pyarrow); ``parquet_pages``
reads a Parquet column chunk's page headers so a preview refuses a page too large to decode.  Nothing here
imports lakemount (``tests/test_layering.py`` holds it so): the API's operations (``api/operations/preview.py``,
``object_diff.py``, ``iceberg_tables.py``) read the bytes through the catalog and hand them over.
"""
