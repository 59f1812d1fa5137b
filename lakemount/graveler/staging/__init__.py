"""Staging as an LSM on the object store (seed 001): staging files, their lists, the group-commit writer."""
