"""Staging as an LSM on the object store (docs/DESIGN.md §4): staging files, their lists, the group-commit writer."""
