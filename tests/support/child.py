"""What every child pytest run of the suite (pytester's, a subprocess's, the CLI's) leaves out.

Two plugins of this environment cost each process that loads them about a second of imports and
no test here uses them: langsmith's (the langgraph extra installs it; it imports langsmith's
client at load) and hypothesis's (its terminal summary imports all of hypothesis in a run where
fabtest is dormant or off). The suite starts hundreds of child runs, so ``tests/conftest.py`` gives
every child ``PYTEST_ADDOPTS`` = :data:`ADDOPTS`, in place of a developer's own (which the outer
run already applied). A test that builds its child's environment from ``os.environ`` without the
outer run's ``PYTEST_*`` variables (``PYTEST_XDIST_WORKER``, ``PYTEST_CURRENT_TEST``) calls
:func:`child_env`. ``tests/plugin/test_spare_hypothesis.py`` keeps both plugins:
its subject is a run in an environment that has them.
"""

from __future__ import annotations

import os

ADDOPTS = "-p no:langsmith_plugin -p no:hypothesispytest"


def child_env(*drop_prefixes: str) -> dict[str, str]:
    """``os.environ`` without the outer run's ``PYTEST_*`` variables and those whose name starts
    with one of ``drop_prefixes``, with the suite's ``PYTEST_ADDOPTS``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", *drop_prefixes))}
    env["PYTEST_ADDOPTS"] = ADDOPTS
    return env
