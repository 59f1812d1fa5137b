"""Hooks as lakeFS actions: action files on the ref being acted on, run around commits, merges, branches and tags.

- ``events``: the events hooks run on and the :class:`Event` an operation hands them;
- ``parser``: action files (``_lakefs_actions/*.yaml``) parsed into actions and hooks;
- ``runner``: finds the actions an event triggers, runs their hooks, records the run;
- ``runs``: the records of runs, and the store ``lakemount/metastore`` implements;
- ``hook``: what a hook type implements and the services it may use;
- ``webhook`` and ``network``: the ``webhook`` type and where it may connect;
- ``checks``: the ``lakemount_check`` type (data checks);
- ``builtin``: the hook types an action may name.

The catalog owns the runner and calls it from its verbs; this package imports
nothing of the catalog (it sees it through ``runner.ActionSource`` and
``hook.HookContext``), only ``lakemount.errors`` and ``lakemount.config``
(``tests/test_layering.py`` checks it).  Importing this package runs nothing.
"""
