"""lakemount: git for data lakes, as a filesystem (versioned core, catalog, FUSE mount, S3 gateway, CLI, jobs)."""
