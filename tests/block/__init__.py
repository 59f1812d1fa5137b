"""Tests of lakemount.block: the conformance suite over every backend, plus backend specifics."""
