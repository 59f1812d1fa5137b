"""Build of lakemount's one C accelerator (SSTable block decoding); metadata lives in pyproject.toml.

The extension is optional: without a compiler, lakemount falls back to the
pure-Python decoder in lakemount/graveler/sstable.py.
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension("lakemount.graveler._sstblock", ["lakemount/graveler/_sstblock.c"], optional=True),
    ]
)
