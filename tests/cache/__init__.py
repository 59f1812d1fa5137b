"""Tests of lakemount.cache."""
