"""Keep pytest's assertion rewriting off fabtest's own modules.

pytest rewrites the ``assert`` statements of every module of a distribution that registers a
``pytest11`` plugin, so it can explain a failing assert in a plugin's helper. fabtest reports its
failures itself (its few asserts are internal invariants), yet each of the ~70 modules a run imports
went through pytest's rewriting import hook: read the source, parse, rewrite, compile. pytest caches
the result next to the module, but only where it may write: in a read-only install (a system or
container site-packages, ``PYTHONDONTWRITEBYTECODE``) every run paid it again, on every ``-n``
worker (docs "Performance": start-up).

:func:`leave_fabtest_alone` runs when this module is imported, first thing in ``fabtest/__init__.py``;
later fabtest imports then
take Python's ordinary path (and its precompiled ``.pyc``). It touches pytest's hook through two
private attributes and does nothing when they are not there, so a pytest that changes them only
brings the old cost back.
"""

from __future__ import annotations

import sys

_PACKAGE = "fabtest"


def leave_fabtest_alone() -> None:
    """Take fabtest out of the names pytest's assertion rewriter has been told to rewrite."""
    for hook in sys.meta_path:
        if type(hook).__name__ != "AssertionRewritingHook":
            continue
        marked = getattr(hook, "_must_rewrite", None)
        if isinstance(marked, set):
            marked.discard(_PACKAGE)
        cache = getattr(hook, "_marked_for_rewrite_cache", None)
        if isinstance(cache, dict):
            for name in [n for n in cache if n == _PACKAGE or n.startswith(_PACKAGE + ".")]:
                del cache[name]


leave_fabtest_alone()
