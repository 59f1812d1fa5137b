"""Build of lakemount's two C extensions; metadata lives in pyproject.toml.

- ``lakemount.graveler._sstblock``: SSTable block encoding and decoding and the
  commit's record loops (without it, their pure-Python twins in
  lakemount/graveler/sstable.py and runs.py, many times slower);
- ``lakemount.fuse._kflags``: the open-reply flags pyfuse3 cannot set (see
  lakemount/fuse/kflags.py; without it, a FLUSH per close and uncached
  directory reads).

Both are optional: a machine without a compiler or libfuse3-dev still installs.
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension("lakemount.graveler._sstblock", ["lakemount/graveler/_sstblock.c"], optional=True),
        Extension("lakemount.fuse._kflags", ["lakemount/fuse/_kflags.c"], libraries=["dl"], optional=True),
    ]
)
