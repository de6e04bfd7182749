"""The runs one round of ``fabtest ab`` buys: some scenarios, some iterations (``-p fabtest.pytest_plugin.ab_select``).

``fabtest ab`` runs its later rounds as ordinary pytest runs of the arm's suite with
``--fabtest-iterations N`` and this plugin, which keeps only the items of the scenarios and
iterations named in the JSON file ``$FABTEST_AB_SELECT`` (``{"nodeids": [...], "iterations": [...]}``,
node ids without the iteration). The user's own arguments (paths, ``-k``, ``-m``) still apply: the
round runs a subset of what the first pass ran, with the iteration numbers (and so the LLM cache
salt) that follow the first pass's, the same on both arms.
"""

from __future__ import annotations

import json
import os
import re

import pytest

__all__ = ["ENV", "base_nodeid", "pytest_collection_modifyitems"]

ENV = "FABTEST_AB_SELECT"
_ITERATION = re.compile(r"(?<=[\[-])iter\d+(?=[\]-])")


def base_nodeid(nodeid: str) -> str:
    """``path::test[rec-iter3]`` → ``path::test[rec]``; ``path::test[iter3]`` → ``path::test``."""
    out = _ITERATION.sub("", nodeid).replace("--", "-").replace("[-", "[").replace("-]", "]")
    return out.removesuffix("[]")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    path = os.environ.get(ENV)
    if not path:
        return
    with open(path, encoding="utf-8") as handle:
        wanted = json.load(handle)
    nodeids, iterations = set(wanted["nodeids"]), set(wanted["iterations"])
    keep: list[pytest.Item] = []
    drop: list[pytest.Item] = []
    for item in items:
        params = getattr(getattr(item, "callspec", None), "params", {})
        iteration = int(params.get("fabtest_iteration", 1))
        (keep if iteration in iterations and base_nodeid(item.nodeid) in nodeids else drop).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep
