"""The SQL-backed ref store and the tables kept beside it: branches, tags, staging, pulls, actions, events, multipart uploads, buckets."""
