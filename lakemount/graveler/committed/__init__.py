"""Committed data: immutable ranges and metaranges in the block store."""
